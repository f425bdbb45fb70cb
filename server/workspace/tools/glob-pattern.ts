/**
 * Glob patterns as the reference's glob helper understands them: `*` and `?` within one path segment,
 * `**` for any number of segments, `[...]` character classes, `/` or `\` as separators. As in shells and
 * Python's glob, a wildcard does not match a leading `.` (hidden files and folders need an explicit `.`).
 */

const GLOB_CHARS = /[*?[]/;

export function splitPattern(pattern: string): string[] {
  return pattern.split(/[\\/]+/).filter((segment) => segment.length > 0 && segment !== ".");
}

/** The leading segments without wildcards (a directory to start the search in) and the rest. */
export function splitLiteralPrefix(segments: readonly string[]): { prefix: string[]; rest: string[] } {
  let i = 0;
  // The last segment names files, so it never narrows the start directory.
  while (i < segments.length - 1 && !GLOB_CHARS.test(segments[i]!)) i++;
  return { prefix: segments.slice(0, i), rest: segments.slice(i) };
}

export function hasRecursiveSegment(segments: readonly string[]): boolean {
  return segments.includes("**");
}

/** Compiles segments to an anchored RegExp over `/`-separated paths relative to the search directory. */
export function globToRegExp(segments: readonly string[]): RegExp {
  let source = "";
  segments.forEach((segment, index) => {
    const last = index === segments.length - 1;
    if (segment === "**") {
      source += last ? "(?:[^/.][^/]*)(?:/[^/.][^/]*)*" : "(?:[^/.][^/]*/)*";
      return;
    }
    source += segmentToRegExp(segment) + (last ? "" : "/");
  });
  return new RegExp(`^${source}$`, "u");
}

function segmentToRegExp(segment: string): string {
  let out = segment.startsWith(".") ? "" : "(?!\\.)";
  for (let i = 0; i < segment.length; i++) {
    const ch = segment[i]!;
    if (ch === "*") {
      out += "[^/]*";
    } else if (ch === "?") {
      out += "[^/]";
    } else if (ch === "[") {
      const close = segment.indexOf("]", i + 2);
      if (close === -1) {
        out += "\\[";
        continue;
      }
      let body = segment.slice(i + 1, close);
      const negated = body.startsWith("!") || body.startsWith("^");
      if (negated) body = body.slice(1);
      out += `[${negated ? "^" : ""}${body.replace(/[\\\]]/g, "\\$&")}]`;
      i = close;
    } else {
      out += ch.replace(/[.+^${}()|\\\]]/g, "\\$&");
    }
  }
  return out;
}
