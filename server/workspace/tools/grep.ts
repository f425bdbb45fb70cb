import { z } from "zod";
import { resolveConfined } from "@/server/workspace/paths";
import { toolPathOf } from "./tool-paths";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { FILE_TYPE_GLOBS, VCS_DIRS, globOptions, splitGlobList } from "./grep-args";
import { defineTool, errorResult, type BuiltinTool, type GrepProgram, type ToolContext } from "./types";

const GREP_TIMEOUT_MS = 30_000;
const GREP_DEFAULT_HEAD_LIMIT = 250;
const GREP_MAX_COLUMNS = 500;

const ZGrepInput = z.object({
  pattern: z.string().min(1).describe("The regular expression (Perl syntax) to search for in file contents"),
  path: z
    .string()
    .optional()
    .describe(
      "File or directory to search in (absolute, or a workspace:///… reference). Defaults to the workspace root.",
    ),
  output_mode: z
    .enum(["content", "files_with_matches", "count"])
    .default("files_with_matches")
    .describe(
      '"content" shows matching lines, "files_with_matches" (default) file paths, "count" match counts',
    ),
  glob: z.string().optional().describe('Filter files by glob, e.g. "*.js" or "*.{ts,tsx}"; "!" excludes'),
  type: z.string().optional().describe('File type to search, e.g. "js", "py", "rust", "go"'),
  "-A": z.number().int().min(0).optional().describe("Lines to show after each match (content mode)"),
  "-B": z.number().int().min(0).optional().describe("Lines to show before each match (content mode)"),
  "-C": z
    .number()
    .int()
    .min(0)
    .optional()
    .describe("Lines to show before and after each match (content mode)"),
  context: z.number().int().min(0).optional().describe("Alias of -C"),
  n: z.boolean().default(true).describe("Show line numbers (content mode, default true)"),
  i: z.boolean().optional().describe("Case-insensitive search"),
  case_insensitive: z.boolean().optional().describe("Alias of i"),
  multiline: z.boolean().default(false).describe("Let the pattern span lines; `.` matches newlines"),
  head_limit: z
    .number()
    .int()
    .min(0)
    .default(GREP_DEFAULT_HEAD_LIMIT)
    .describe(`Show only the first N lines/entries (default ${GREP_DEFAULT_HEAD_LIMIT}, 0 = unlimited)`),
  offset: z.number().int().min(0).default(0).describe("Skip the first N lines/entries before head_limit"),
});

type GrepInput = z.infer<typeof ZGrepInput>;

/**
 * Grep (reference `_grep.py`): ripgrep where the machine has it (Berth's images do), with the reference's
 * argv, so `.gitignore` rules apply in a git repository and hidden files are searched; GNU grep otherwise,
 * which every machine with coreutils has: Perl regexes (`-P`, falling back to `-E` where grep lacks PCRE),
 * binary files skipped, VCS folders excluded, symlinked folders not followed, no `.gitignore`.
 */
export function createGrepTool(context: ToolContext): BuiltinTool {
  return defineTool({
    name: "Grep",
    description:
      "Searches file contents with a regular expression under a path of the workspace. " +
      "Output modes: files_with_matches (default), content (matching lines), count.",
    input: ZGrepInput,
    async run(input, options) {
      const { machine } = context;
      const target = await resolveConfined(machine, toolPathOf(machine, input.path ?? machine.workdir));
      const info = await machine.stat(target);
      if (!info) return errorResult(`Error: Path does not exist: ${input.path ?? "."}`);
      if (input.type !== undefined && !FILE_TYPE_GLOBS[input.type]) {
        return errorResult(
          `Error: unknown file type '${input.type}'. Known: ${Object.keys(FILE_TYPE_GLOBS).join(", ")}`,
        );
      }
      const isDirectory = info.type === "directory";
      const program = await grepProgramOf(context);
      let result;
      if (program === "ripgrep") {
        result = await runGrep(context, ripgrepArgv(input, target), options.signal);
      } else {
        result = await runGrep(context, buildArgv(input, target, isDirectory, "-P"), options.signal);
        if (
          result.exitCode === 2 &&
          /-P|perl/i.test(result.stderr.toString("utf8")) &&
          result.stdout.length === 0
        ) {
          result = await runGrep(context, buildArgv(input, target, isDirectory, "-E"), options.signal);
        }
      }
      if (result.timedOut) {
        return errorResult(
          program === "ripgrep"
            ? `Ripgrep search timed out after ${GREP_TIMEOUT_MS / 1000} seconds. Try searching a more specific path or pattern.`
            : `Grep timed out after ${GREP_TIMEOUT_MS}ms: ${input.pattern}`,
        );
      }
      const stdout = result.stdout.toString("utf8");
      // Both exit 2 on any error (even an unreadable file) while still printing the matches they found.
      if (result.exitCode !== 0 && result.exitCode !== 1 && stdout.length === 0) {
        const name = program === "ripgrep" ? "ripgrep" : "grep";
        return errorResult(
          `${name} error (code ${result.exitCode}): ${result.stderr.toString("utf8").trim()}`,
        );
      }

      // GNU grep's multiline mode (-z) ends each match with NUL; ripgrep's prints whole lines.
      const separator = input.multiline && program === "grep" ? /\0|\n/ : "\n";
      let entries = stdout.split(separator).filter((line) => line.length > 0);
      if (input.output_mode === "count") entries = entries.filter((line) => !/(^|:)0$/.test(line));
      if (input.output_mode === "files_with_matches") entries.sort();
      if (input.output_mode === "content") entries = entries.map(cutLongLine);
      if (entries.length === 0)
        return { content: `No matches found for pattern: ${input.pattern}`, isError: false };

      const end = input.head_limit === 0 ? entries.length : input.offset + input.head_limit;
      const page = entries.slice(input.offset, end);
      let content = page.join("\n");
      const paginated = input.offset > 0 || end < entries.length;
      if (paginated) {
        content += `\n\n[Showing results with pagination = limit: ${input.head_limit}${input.offset ? `, offset: ${input.offset}` : ""}]`;
      }
      return { content, isError: false, metadata: { total: entries.length, shown: page.length } };
    },
  });
}

function buildArgv(input: GrepInput, target: string, isDirectory: boolean, syntax: "-P" | "-E"): string[] {
  const argv = ["grep", "-r", syntax, "--binary-files=without-match", "--color=never", "-s"];
  argv.push(...VCS_DIRS.map((dir) => `--exclude-dir=${dir}`));
  if (input.multiline) argv.push("-z");
  if (input.i || input.case_insensitive) argv.push("-i");
  if (input.output_mode === "files_with_matches") argv.push("-l");
  if (input.output_mode === "count") argv.push("-c");
  if (input.output_mode === "content") {
    // With -z a "line" is the whole file: print only the matched text, and line numbers mean nothing.
    if (input.multiline) argv.push("-o");
    else if (input.n) argv.push("-n");
    const around = input["-C"] ?? input.context;
    if (around !== undefined) argv.push("-C", String(around));
    else {
      if (input["-B"] !== undefined) argv.push("-B", String(input["-B"]));
      if (input["-A"] !== undefined) argv.push("-A", String(input["-A"]));
    }
  }
  argv.push(isDirectory ? "-H" : "-h");
  for (const glob of input.type !== undefined ? (FILE_TYPE_GLOBS[input.type] ?? []) : [])
    argv.push(`--include=${glob}`);
  if (input.glob !== undefined) argv.push(...globOptions(input.glob));
  const pattern = input.multiline && syntax === "-P" ? `(?s)${input.pattern}` : input.pattern;
  argv.push("-e", pattern, "--", target);
  return argv;
}

/**
 * The reference's ripgrep argv: hidden files searched, VCS folders skipped, long lines cut by ripgrep
 * itself; `type` maps to the same globs GNU grep gets, so both accept the same names.
 */
function ripgrepArgv(input: GrepInput, target: string): string[] {
  const argv = ["rg", "--hidden", ...VCS_DIRS.flatMap((dir) => ["--glob", `!${dir}`])];
  argv.push("--max-columns", String(GREP_MAX_COLUMNS), "--color", "never");
  if (input.multiline) argv.push("-U", "--multiline-dotall");
  if (input.i || input.case_insensitive) argv.push("-i");
  if (input.output_mode === "files_with_matches") argv.push("-l");
  if (input.output_mode === "count") argv.push("-c");
  if (input.output_mode === "content") {
    if (input.n) argv.push("-n");
    const around = input["-C"] ?? input.context;
    if (around !== undefined) argv.push("-C", String(around));
    else {
      if (input["-B"] !== undefined) argv.push("-B", String(input["-B"]));
      if (input["-A"] !== undefined) argv.push("-A", String(input["-A"]));
    }
  }
  for (const glob of input.type !== undefined ? (FILE_TYPE_GLOBS[input.type] ?? []) : [])
    argv.push("--glob", glob);
  if (input.glob !== undefined) for (const glob of splitGlobList(input.glob)) argv.push("--glob", glob);
  argv.push("-e", input.pattern, "--", target);
  return argv;
}

/** Which program a machine greps with, asked once per machine (`context.grepProgram` decides if set). */
const detectedPrograms = new WeakMap<WorkspaceMachine, Promise<GrepProgram>>();

function grepProgramOf(context: ToolContext): Promise<GrepProgram> {
  if (context.grepProgram) return Promise.resolve(context.grepProgram);
  const { machine } = context;
  let detected = detectedPrograms.get(machine);
  if (!detected) {
    detected = machine.exec(["rg", "--version"], { cwd: machine.workdir, timeoutMs: 10_000 }).then(
      (result): GrepProgram => (result.exitCode === 0 ? "ripgrep" : "grep"),
      (): GrepProgram => "grep",
    );
    detectedPrograms.set(machine, detected);
  }
  return detected;
}

function runGrep(context: ToolContext, argv: string[], signal: AbortSignal | undefined) {
  return context.machine.exec(argv, {
    cwd: context.machine.workdir,
    timeoutMs: GREP_TIMEOUT_MS,
    signal,
    maxBufferBytes: 32 * 1024 * 1024,
  });
}

function cutLongLine(line: string): string {
  return line.length > GREP_MAX_COLUMNS ? `${line.slice(0, GREP_MAX_COLUMNS)} [... long line omitted]` : line;
}
