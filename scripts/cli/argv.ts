/** Flags that take no value (`--yes`, `--json`); every other `--flag` takes the next word or `--flag=value`. */
const BOOLEAN_FLAGS = new Set(["yes", "json", "help"]);

export type ParsedArgv = {
  command: string;
  positionals: string[];
  flags: Record<string, string | boolean>;
};

export class UsageError extends Error {}

/** `tenant create --name Acme --slug acme` → { command: "tenant create", positionals: [], flags }. */
export function parseArgv(argv: readonly string[]): ParsedArgv {
  const words: string[] = [];
  const flags: Record<string, string | boolean> = {};
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    if (!token.startsWith("--")) {
      words.push(token);
      continue;
    }
    const [name = "", inline] = token.slice(2).split(/=(.*)/s, 2);
    if (!name) throw new UsageError(`"${token}" is not a flag`);
    if (name in flags) throw new UsageError(`--${name} is given twice`);
    if (inline !== undefined) flags[name] = inline;
    else if (BOOLEAN_FLAGS.has(name)) flags[name] = true;
    else {
      const value = argv[i + 1];
      if (value === undefined || value.startsWith("--")) throw new UsageError(`--${name} needs a value`);
      flags[name] = value;
      i++;
    }
  }
  return { command: words.slice(0, 2).join(" "), positionals: words.slice(2), flags };
}
