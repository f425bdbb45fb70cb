/** ripgrep's `--type` names we support, mapped to file-name globs for GNU grep's `--include`. */
export const FILE_TYPE_GLOBS: Record<string, string[]> = {
  c: ["*.c", "*.h"],
  cpp: ["*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.hxx", "*.h"],
  cs: ["*.cs"],
  css: ["*.css", "*.scss", "*.sass", "*.less"],
  go: ["*.go"],
  html: ["*.html", "*.htm"],
  java: ["*.java"],
  js: ["*.js", "*.jsx", "*.mjs", "*.cjs", "*.vue"],
  json: ["*.json", "*.jsonl"],
  kotlin: ["*.kt", "*.kts"],
  lua: ["*.lua"],
  md: ["*.md", "*.markdown", "*.mdx"],
  php: ["*.php"],
  py: ["*.py", "*.pyi"],
  rb: ["*.rb"],
  rust: ["*.rs"],
  sh: ["*.sh", "*.bash", "*.zsh"],
  sql: ["*.sql"],
  swift: ["*.swift"],
  toml: ["*.toml"],
  ts: ["*.ts", "*.tsx", "*.mts", "*.cts"],
  txt: ["*.txt"],
  xml: ["*.xml"],
  yaml: ["*.yaml", "*.yml"],
};

/** Version-control folders ripgrep is told to skip in the reference (`--glob !.git` ...). */
export const VCS_DIRS = [".git", ".svn", ".hg", ".bzr", ".jj", ".sl"];

/** Expands `{a,b}` alternatives (one level, repeated), since grep's --include has no braces. */
function expandBraces(glob: string): string[] {
  const match = /\{([^{}]*)\}/.exec(glob);
  if (!match) return [glob];
  const head = glob.slice(0, match.index);
  const tail = glob.slice(match.index + match[0].length);
  return match[1]!.split(",").flatMap((option) => expandBraces(head + option + tail));
}

/**
 * Turns the Grep tool's `glob` (one or more globs separated by spaces or commas outside braces; `!` negates)
 * into grep `--include` / `--exclude` options. grep matches these against file base names only, so a glob
 * with a folder part is reduced to its last segment.
 */
export function globOptions(globs: string): string[] {
  const options: string[] = [];
  for (const raw of splitGlobList(globs)) {
    const negated = raw.startsWith("!");
    const body = negated ? raw.slice(1) : raw;
    for (const expanded of expandBraces(body)) {
      const baseName = expanded.split("/").pop() ?? expanded;
      if (baseName.length === 0 || baseName === "**") continue;
      options.push(`--${negated ? "exclude" : "include"}=${baseName}`);
    }
  }
  return options;
}

/** The Grep tool's `glob` as separate globs: split on spaces and commas outside braces. */
export function splitGlobList(globs: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = "";
  for (const ch of globs) {
    if (ch === "{") depth++;
    if (ch === "}") depth = Math.max(0, depth - 1);
    if (depth === 0 && (ch === "," || /\s/.test(ch))) {
      if (current) parts.push(current);
      current = "";
      continue;
    }
    current += ch;
  }
  if (current) parts.push(current);
  return parts;
}
