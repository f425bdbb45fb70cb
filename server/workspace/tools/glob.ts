import path from "node:path";
import { z } from "zod";
import { resolveConfined } from "@/server/workspace/paths";
import { globToRegExp, hasRecursiveSegment, splitLiteralPrefix, splitPattern } from "./glob-pattern";
import { toolPathOf } from "./tool-paths";
import { defineTool, errorResult, type BuiltinTool, type ToolContext } from "./types";

const GLOB_TIMEOUT_MS = 30_000;
/**
 * The reference has no cap, so `**` in a big tree floods the model's context. We keep the newest files
 * and say how many were left out.
 */
const GLOB_MAX_RESULTS = 1000;

const ZGlobInput = z.object({
  pattern: z
    .string()
    .min(1)
    .describe('The glob pattern to match files against, e.g. "**/*.ts" or "src/*.py"'),
  path: z
    .string()
    .optional()
    .describe(
      "The directory to search in (absolute, or a workspace:///… reference). Defaults to the workspace root.",
    ),
});

/**
 * Glob (reference `_glob.py`): files matching the pattern, newest first. Runs GNU `find` through the
 * backend (no Python helper needed in the sandbox) and matches in-process; symlinked folders are not
 * followed, symlinks to files are listed.
 */
export function createGlobTool(context: ToolContext): BuiltinTool {
  return defineTool({
    name: "Glob",
    description:
      "Finds files by glob pattern (`*`, `?`, `**`, `[abc]`) under a directory of the workspace, " +
      "sorted by modification time, newest first.",
    input: ZGlobInput,
    async run(input, options) {
      const { machine } = context;
      let searchRoot = toolPathOf(machine, input.path ?? machine.workdir);
      let pattern = input.pattern;
      if (path.posix.isAbsolute(pattern)) {
        // An absolute pattern carries its own start directory; it is confined like any path.
        searchRoot = "/";
        pattern = pattern.slice(1);
      }
      const segments = splitPattern(pattern);
      if (segments.length === 0) return errorResult(`Error: empty glob pattern: ${input.pattern}`);
      const { prefix, rest } = splitLiteralPrefix(segments);
      const shownBase = path.posix.resolve(machine.workdir, searchRoot);
      const base = await resolveConfined(machine, path.posix.join(shownBase, ...prefix));
      const info = await machine.stat(base);
      if (info?.type !== "directory") {
        return prefix.length === 0
          ? errorResult(`Directory not found: ${shownBase}`)
          : { content: `No files found matching pattern: ${input.pattern}`, isError: false };
      }

      const argv = ["find", base, "-mindepth", "1"];
      if (!hasRecursiveSegment(rest)) argv.push("-maxdepth", String(rest.length));
      argv.push(
        "(",
        "-type",
        "f",
        "-o",
        "(",
        "-type",
        "l",
        "-xtype",
        "f",
        ")",
        ")",
        "-printf",
        "%T@\\t%P\\0",
      );
      const result = await machine.exec(argv, {
        cwd: base,
        timeoutMs: GLOB_TIMEOUT_MS,
        signal: options.signal,
        maxBufferBytes: 64 * 1024 * 1024,
      });
      if (result.timedOut) return errorResult(`Glob timed out after ${GLOB_TIMEOUT_MS}ms: ${input.pattern}`);
      const output = result.stdout.toString("utf8");
      // find exits 1 when some folder was unreadable but still lists the rest; only no output is a failure.
      if (result.exitCode !== 0 && output.length === 0) {
        return errorResult(`Glob helper failed: ${result.stderr.toString("utf8").trim()}`);
      }

      const matcher = globToRegExp(rest);
      const matches: Array<{ file: string; mtime: number }> = [];
      for (const record of output.split("\0")) {
        const tab = record.indexOf("\t");
        if (tab === -1) continue;
        const relative = record.slice(tab + 1);
        if (matcher.test(relative)) {
          matches.push({ file: path.posix.join(base, relative), mtime: Number(record.slice(0, tab)) });
        }
      }
      if (matches.length === 0)
        return { content: `No files found matching pattern: ${input.pattern}`, isError: false };
      matches.sort((a, b) => b.mtime - a.mtime || a.file.localeCompare(b.file));
      const shown = matches.slice(0, GLOB_MAX_RESULTS).map((match) => match.file);
      let content = shown.join("\n");
      if (matches.length > shown.length) {
        content += `\n(Results are truncated: showing the ${shown.length} most recently modified of ${matches.length} files. Use a more specific path or pattern.)`;
      }
      if (result.truncated)
        content += "\n(The file listing was too large and was cut; some files may be missing.)";
      return {
        content,
        isError: false,
        metadata: { count: matches.length, truncated: matches.length > shown.length },
      };
    },
  });
}
