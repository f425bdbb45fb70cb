import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { CommandExitError, type CommandHandle, type Sandbox } from "e2b";
import { AppError } from "@/server/shared/errors";
import {
  abortedBeforeStart,
  awaitExec,
  ExecOutput,
  type OutputStream,
} from "@/server/workspace/drivers/exec-output/exec-output";
import type { ExecOptions, ExecResult } from "@/server/workspace/drivers/port";
import { toAppError } from "./e2b-errors";
import { framedArgv, outputDecoder, type OutputFraming } from "./e2b-output-framing";

/**
 * Commands through `sandbox.commands`, which runs a STRING with `/bin/bash -l -c`. Argv is therefore
 * shell-quoted word by word; scripts get their arguments as `$1..$n`, never spliced into their text.
 *
 * The SDK kills a command after 60 s unless told otherwise: every call here passes `timeoutMs` (0 for
 * agent commands, which Berth times itself, so it can kill the whole process tree, which envd's own
 * deadline does not: envd signals the process alone).
 */
export function shellQuote(word: string): string {
  if (word === "") return "''";
  if (/^[\w@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'"'"'`)}'`;
}

/** `sh -c <script> <name> <args...>` as one bash command line. */
export function scriptLine(script: string, name: string, args: readonly string[]): string {
  return ["exec", "/bin/sh", "-c", script, name, ...args].map(shellQuote).join(" ");
}

export type ChoreResult = { exitCode: number; stdout: string; stderr: string };

/** A short script of Berth's own, run to completion (non-zero exits are results, not errors). */
export async function runChore(
  sandbox: Sandbox,
  script: string,
  args: readonly string[],
  options: { user: string; timeoutMs: number; requestTimeoutMs: number; envs?: Record<string, string> },
): Promise<ChoreResult> {
  try {
    const result = await sandbox.commands.run(scriptLine(script, "berth", args), {
      user: options.user,
      timeoutMs: options.timeoutMs,
      requestTimeoutMs: options.requestTimeoutMs,
      cwd: "/",
      ...(options.envs ? { envs: options.envs } : {}),
    });
    return { exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr };
  } catch (error) {
    if (error instanceof CommandExitError) {
      return { exitCode: error.exitCode, stdout: error.stdout, stderr: error.stderr };
    }
    throw toAppError(error, "run a command in the sandbox", { sandboxId: sandbox.sandboxId });
  }
}

/**
 * Runs argv in a new session (`setsid`: its process group id is its pid, recorded in a pid file), so a
 * timeout or an abort kills the command AND everything it forked, from a second command as root. Without
 * setsid in the template, the command runs in envd's group and only it is signalled.
 */
const WRAPPER = 'echo $$ > "$0"; "$@"; rc=$?; rm -f "$0"; exit $rc';
const KILLER = 'read -r pid < "$1" 2>/dev/null && kill -9 -"$pid" 2>/dev/null; rm -f "$1"; exit 0';

export type ExecContext = {
  user: string;
  cwd: string;
  env: Record<string, string>;
  requestTimeoutMs: number;
  /** How output crosses the SDK (e2b-output-framing.ts): byte-exact through the relay, or as text. */
  framing: OutputFraming;
};

export async function execInSandbox(
  sandbox: Sandbox,
  argv: readonly string[],
  context: ExecContext,
  options: ExecOptions,
): Promise<ExecResult> {
  if (argv.length === 0) throw new AppError("BAD_REQUEST", "exec needs a command");
  if (options.signal?.aborted) return abortedBeforeStart();
  const pidFile = `/tmp/.berth-exec-${randomBytes(8).toString("hex")}.pid`;
  const words = [WRAPPER, pidFile, ...framedArgv(context.framing, argv)].map(shellQuote).join(" ");
  const line = `if command -v setsid >/dev/null 2>&1; then exec setsid /bin/sh -c ${words}; else exec /bin/sh -c ${words}; fi`;

  const output = new ExecOutput(options);
  const keep = (type: OutputStream) => (chunk: Buffer) => output.push(type, chunk);
  const decoders = {
    stdout: outputDecoder(context.framing, keep("stdout")),
    stderr: outputDecoder(context.framing, keep("stderr")),
  };

  let handle: CommandHandle;
  try {
    handle = await sandbox.commands.run(line, {
      background: true,
      user: context.user,
      cwd: context.cwd,
      envs: { ...context.env, ...options.env },
      stdin: options.stdin !== undefined,
      timeoutMs: 0,
      requestTimeoutMs: context.requestTimeoutMs,
      onStdout: (text) => decoders.stdout.push(text),
      onStderr: (text) => decoders.stderr.push(text),
    });
  } catch (error) {
    throw toAppError(error, "start a command", { sandboxId: sandbox.sandboxId });
  }

  if (options.stdin !== undefined)
    void feedStdin(sandbox, handle.pid, options.stdin, context.requestTimeoutMs);
  const finished = waitForExit(handle).catch((error: unknown) => {
    throw toAppError(error, "run a command", { sandboxId: sandbox.sandboxId });
  });
  return awaitExec(
    {
      finished,
      kill: () => killProcessTree(sandbox, pidFile, handle, context.requestTimeoutMs),
      onEnd: () => {
        decoders.stdout.end();
        decoders.stderr.end();
      },
    },
    output,
    options,
  );
}

async function waitForExit(handle: CommandHandle): Promise<number> {
  try {
    return (await handle.wait()).exitCode;
  } catch (error) {
    if (error instanceof CommandExitError) return error.exitCode;
    throw error;
  }
}

/** SIGKILLs the command's process group; if the output still does not end, stops listening. */
async function killProcessTree(
  sandbox: Sandbox,
  pidFile: string,
  handle: CommandHandle,
  requestTimeoutMs: number,
): Promise<void> {
  await runChore(sandbox, KILLER, [pidFile], { user: "root", timeoutMs: 30_000, requestTimeoutMs }).catch(
    () => undefined,
  );
  // The group is gone; envd reports the end once the command's own process exited. As a last resort (no
  // setsid, a pid file not written yet), signal the process itself, then stop waiting after a grace period.
  const grace = setTimeout(() => {
    void handle.kill().catch(() => false);
    setTimeout(() => void handle.disconnect(), 5_000).unref();
  }, 2_000);
  grace.unref();
  await handle.wait().catch(() => undefined);
  clearTimeout(grace);
}

const STDIN_CHUNK = 64 * 1024;

/** Streams stdin with one SendInput per chunk, then closes it; a command that exits early ends the feed. */
async function feedStdin(
  sandbox: Sandbox,
  pid: number,
  stdin: Readable | Uint8Array | string,
  requestTimeoutMs: number,
): Promise<void> {
  const source =
    typeof stdin === "string" || stdin instanceof Uint8Array
      ? Readable.from([Buffer.from(stdin)])
      : stdin instanceof Readable
        ? stdin
        : Readable.from(stdin as AsyncIterable<Buffer>);
  try {
    for await (const piece of source) {
      const chunk = Buffer.isBuffer(piece) ? piece : Buffer.from(piece as string);
      for (let offset = 0; offset < chunk.length; offset += STDIN_CHUNK) {
        await sandbox.commands.sendStdin(pid, chunk.subarray(offset, offset + STDIN_CHUNK), {
          requestTimeoutMs,
        });
      }
    }
    await sandbox.commands.closeStdin(pid, { requestTimeoutMs });
  } catch {
    source.destroy();
  }
}
