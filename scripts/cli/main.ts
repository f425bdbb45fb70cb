/**
 * The operator CLI's one entry: arguments in, exit code out (0 done, 2 usage or invalid arguments, 1 refused:
 * a typed error, its code printed; 3 failed: the database or Redis unreachable, an internal error). Its
 * output goes to `io`; it leaves the process' shared connections open for its caller to close
 * (scripts/berth-cli.ts, the `npm run berth` composition root, closes them before the process exits).
 */
import { type z } from "zod";
import { loadHttpConfig } from "@/server/config/http";
import { processBerth } from "@/server/composition/process-berth";
import { isAppError } from "@/server/shared/errors";
import { parseArgv, UsageError } from "./argv";
import { COMMANDS } from "./commands";
import { linkBaseUrl, NothingRunningError, useRunningBerth } from "./running-berth";

/** Where the CLI writes: the process' stdout and stderr, or a test's buffers. */
export type CliIo = { stdout: (text: string) => void; stderr: (text: string) => void };

const processIo: CliIo = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
};

const EXIT = { ok: 0, refused: 1, usage: 2, failed: 3 } as const;

function usage(): string {
  return [
    "usage: npm run berth -- <command> [arguments] [--json]",
    ...Object.values(COMMANDS).map((c) => `  ${c.usage}`),
  ].join("\n");
}

/** "--slug: --slug <slug> is required", "unknown flag --bogus", "argument 1: …": one line per problem. */
function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      if (issue.code === "unrecognized_keys")
        return issue.keys.map((key) => `unknown flag --${key}`).join("; ");
      const [where, which] = issue.path;
      if (where === "flags" && typeof which === "string") return `--${which}: ${issue.message}`;
      if (where === "positionals") {
        return typeof which === "number" ? `argument ${which + 1}: ${issue.message}` : issue.message;
      }
      return issue.message;
    })
    .join("; ");
}

export async function runBerthCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const err = (line: string) => io.stderr(`${line}\n`);
  let json = false;
  try {
    const { command, positionals, flags } = parseArgv(argv);
    json = flags.json === true;
    const { json: _json, ...rest } = flags;
    if (!command || flags.help) {
      io.stdout(`${usage()}\n`);
      return command || flags.help ? EXIT.ok : EXIT.usage;
    }
    const spec = COMMANDS[command];
    if (!spec) throw new UsageError(`unknown command "${command}"`);
    const parsed = spec.schema.safeParse({ positionals, flags: rest });
    if (!parsed.success) {
      throw new UsageError(`${describeIssues(parsed.error)}\n  usage: ${spec.usage}`);
    }
    const running = await useRunningBerth();
    const result = await spec.run(parsed.data as never, {
      // The CLI's root, built from the environment just resolved (closed by scripts/berth-cli.ts).
      berth: processBerth(),
      baseUrl: linkBaseUrl(running, () => loadHttpConfig().baseUrl),
      print: (line) => io.stdout(`${line}\n`),
    });
    io.stdout(json ? `${JSON.stringify(result.json, null, 2)}\n` : `${result.text.join("\n")}\n`);
    return EXIT.ok;
  } catch (error) {
    if (error instanceof UsageError) {
      err(`berth: ${error.message}`);
      if (!error.message.includes("usage:")) err(usage());
      return EXIT.usage;
    }
    if (isAppError(error) && error.httpStatus < 500) {
      if (json) {
        io.stdout(
          `${JSON.stringify({ error: { code: error.code, message: error.userMessage, details: error.details ?? null } })}\n`,
        );
      }
      err(`berth: ${error.code}: ${error.userMessage}`);
      return error.code === "BAD_REQUEST" ? EXIT.usage : EXIT.refused;
    }
    if (error instanceof NothingRunningError) {
      err(`berth: ${error.message}`);
      return EXIT.failed;
    }
    err(`berth: failed: ${error instanceof Error ? error.message : String(error)}`);
    return EXIT.failed;
  }
}
