/**
 * `npm run berth -- <group> <command> …`: the operator CLI for scripted installs (tenants and operators),
 * over the same services as the `operator.*` API. Composition root: reads DATABASE_URL, REDIS_URL (the
 * queues for workspace stops and tenant deletion) and BERTH_BASE_URL (invitation links) from the
 * environment; without DATABASE_URL, those of the `npm start` running on BERTH_DATA_DIR (cli/running-berth.ts). Exit codes: 0 done, 2 usage or invalid arguments, 1 refused (a typed error: its code is
 * printed), 3 failed (the database or Redis unreachable, an internal error).
 */
import { type z } from "zod";
import { loadHttpConfig } from "@/server/config/http";
import { disconnectDb } from "@/server/db";
import { closeSharedQueues } from "@/server/queue/queues";
import { closeSharedRedis } from "@/server/redis";
import { isAppError } from "@/server/shared/errors";
import { parseArgv, UsageError } from "./cli/argv";
import { COMMANDS } from "./cli/commands";
import { NothingRunningError, useRunningBerth } from "./cli/running-berth";

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

async function run(argv: readonly string[]): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  let json = false;
  try {
    const { command, positionals, flags } = parseArgv(argv);
    json = flags.json === true;
    const { json: _json, ...rest } = flags;
    if (!command || flags.help) {
      process.stdout.write(`${usage()}\n`);
      return command || flags.help ? EXIT.ok : EXIT.usage;
    }
    const spec = COMMANDS[command];
    if (!spec) throw new UsageError(`unknown command "${command}"`);
    const parsed = spec.schema.safeParse({ positionals, flags: rest });
    if (!parsed.success) {
      throw new UsageError(`${describeIssues(parsed.error)}\n  usage: ${spec.usage}`);
    }
    await useRunningBerth();
    const result = await spec.run(parsed.data as never, {
      baseUrl: loadHttpConfig().baseUrl,
      print: (line) => process.stdout.write(`${line}\n`),
    });
    process.stdout.write(json ? `${JSON.stringify(result.json, null, 2)}\n` : `${result.text.join("\n")}\n`);
    return EXIT.ok;
  } catch (error) {
    if (error instanceof UsageError) {
      err(`berth: ${error.message}`);
      if (!error.message.includes("usage:")) err(usage());
      return EXIT.usage;
    }
    if (isAppError(error) && error.httpStatus < 500) {
      if (json) {
        process.stdout.write(
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
  } finally {
    await Promise.allSettled([closeSharedQueues(), closeSharedRedis(), disconnectDb()]);
  }
}

process.exitCode = await run(process.argv.slice(2));
