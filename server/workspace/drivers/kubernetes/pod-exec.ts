import { randomBytes } from "node:crypto";
import type { Readable } from "node:stream";
import { AppError } from "@/server/shared/errors";
import type { ExecOptions, ExecResult } from "@/server/workspace/drivers/port";
import {
  abortedBeforeStart,
  awaitExec,
  ExecOutput,
  type OutputStream,
} from "@/server/workspace/drivers/exec-output/exec-output";
import { feedStdin, openExec, STDIN_UNFRAMER, V5_PROTOCOL, type ExecTarget } from "./kube-exec";
import type { KubeClient } from "./kube-client";

/** Receives output; returning false pauses the session until `resume()`. */
export type OutputSink = (type: OutputStream, chunk: Buffer) => boolean;

export type ExecHandle = {
  /** The status channel's exit code; null when the session ended without one (Pod gone, connection cut). */
  finished: Promise<number | null>;
  resume(): void;
  /** Detaches (closes the socket); the process keeps running unless killed. */
  close(): void;
};

/** The subprotocol the cluster negotiates, learnt once per API server (a probe exec when still unknown). */
const negotiated = new WeakMap<KubeClient, string>();

/**
 * Exec into one container of a workspace Pod. Stdin that needs EOF works on every server: v5 half-closes it,
 * older servers get the command wrapped in STDIN_UNFRAMER with framed stdin.
 */
export class PodExecutor {
  constructor(
    readonly kube: KubeClient,
    readonly target: ExecTarget,
  ) {}

  async start(
    argv: readonly string[],
    io: { stdin?: Readable | Uint8Array | string | undefined; sink: OutputSink },
  ): Promise<ExecHandle> {
    if (argv.length === 0) throw new AppError("BAD_REQUEST", "exec needs a command");
    const hasStdin = io.stdin !== undefined;
    if (hasStdin && !negotiated.has(this.kube)) await this.run(["true"]);
    const framed = hasStdin && negotiated.get(this.kube) !== V5_PROTOCOL;
    const channel = await openExec(
      this.kube.kc,
      this.target,
      framed ? ["node", "-e", STDIN_UNFRAMER, "--", ...argv] : argv,
      {
        stdin: hasStdin,
        sinks: { stdout: (chunk) => io.sink("stdout", chunk), stderr: (chunk) => io.sink("stderr", chunk) },
      },
    );
    negotiated.set(this.kube, channel.protocol);
    let stdinError: unknown = null;
    const fed = hasStdin
      ? feedStdin(channel, io.stdin!, framed).catch((error: unknown) => {
          stdinError = error;
        })
      : Promise.resolve();
    const finished = channel.done.then(async (outcome) => {
      await fed;
      if (stdinError) {
        throw new AppError(
          "UNAVAILABLE",
          `stdin of the command failed: ${stdinError instanceof Error ? stdinError.message : "unknown error"}`,
          {
            cause: stdinError,
          },
        );
      }
      return outcome.exitCode;
    });
    return { finished, resume: () => channel.resume(), close: () => channel.close() };
  }

  /**
   * Runs a short command to completion with capped collected output (Berth's own chores and scripts).
   * `timeoutMs` bounds a chore that must not hold up its caller for ever (a gateway start's steps): past
   * it the session is dropped and the run fails UNAVAILABLE, whatever the connection or the process does.
   */
  async run(
    argv: readonly string[],
    stdin?: Readable | Uint8Array | string,
    options: { maxBytes?: number; timeoutMs?: number } = {},
  ): Promise<{ exitCode: number; stdout: string; stderr: string }> {
    const output = new ExecOutput({ maxBufferBytes: options.maxBytes ?? 64 * 1024 * 1024 });
    const sink: OutputSink = (type, chunk) => {
      output.push(type, chunk);
      return true;
    };
    const exitCode = await withinTime(
      async (started) => {
        const handle = await this.start(argv, { stdin, sink });
        started(handle);
        return handle.finished;
      },
      options.timeoutMs,
      () =>
        new AppError(
          "UNAVAILABLE",
          `exec of ${argv[0]} in ${this.target.pod} did not finish within ${options.timeoutMs} ms`,
          { userMessage: "The workspace Pod is not reachable" },
        ),
    );
    const stderr = output.stderr.toString("utf8");
    if (exitCode === null) {
      throw new AppError(
        "UNAVAILABLE",
        `exec in ${this.target.pod} ended without an exit status ${stderr.trim()}`,
        {
          userMessage: "The workspace Pod is not reachable",
        },
      );
    }
    return { exitCode, stdout: output.stdout.toString("utf8"), stderr };
  }
}

/**
 * `work`'s result, or `timedOut()` thrown once `timeoutMs` passed (the session `work` reported through
 * `started` is closed then, and one that reports itself later is closed at once). No bound without `timeoutMs`.
 */
async function withinTime<T>(
  work: (started: (handle: ExecHandle) => void) => Promise<T>,
  timeoutMs: number | undefined,
  timedOut: () => Error,
): Promise<T> {
  if (timeoutMs === undefined) return work(() => undefined);
  let handle: ExecHandle | undefined;
  let expired = false;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      expired = true;
      handle?.close();
      reject(timedOut());
    }, timeoutMs);
  });
  const running = work((started) => {
    handle = started;
    if (expired) started.close();
  });
  // Past the deadline the work's own outcome no longer matters; it must not surface as unhandled.
  running.catch(() => undefined);
  try {
    return await Promise.race([running, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs as a session leader (setsid), so its pid is the process group: recording it lets a SECOND exec kill
 * the command and everything it forked, which closing the exec socket never does. Arguments: $0 pid file,
 * $1 cwd, $2 the number of NAME=value pairs that follow, then the command. The pid file stays while
 * anything of the group outlives the command (a background child still holding the output open), so a
 * timeout can still kill it; pgrep is forked without a pipe or subshell, which would count as members.
 */
const WRAPPER = [
  'echo $$ > "$0" || exit 126',
  'cd -- "$1" || { rm -f "$0"; exit 127; }',
  "n=$2; shift 2",
  'while [ "$n" -gt 0 ]; do export "$1"; shift; n=$((n - 1)); done',
  '"$@"; rc=$?',
  'pgrep -g $$ > "$0.group" 2>/dev/null; left=0',
  'while read -r p; do [ "$p" = $$ ] || left=1; done < "$0.group"; rm -f "$0.group"',
  '[ $left = 1 ] || rm -f "$0"',
  "exit $rc",
].join("\n");
/**
 * Fork-free until the kill: under a fork bomb every fork fails, but builtins (read, kill) still work.
 * Exit 3: no pid file (not written yet, or the command and its whole group are already gone).
 */
const KILLER = [
  'read -r pid < "$0" 2>/dev/null',
  'if [ -n "$pid" ]; then kill -9 -"$pid" 2>/dev/null; rm -f "$0"; exit 0; fi',
  "exit 3",
].join("; ");
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SETSID_NOTICE = /setsid: child \d+ did not exit normally[^\n]*\n?$/;

function withoutSetsidNotice(stderr: Buffer): Buffer {
  const text = stderr.toString("utf8");
  return SETSID_NOTICE.test(text) ? Buffer.from(text.replace(SETSID_NOTICE, ""), "utf8") : stderr;
}

/**
 * Kills the command's process group from a second exec. A missing pid file is retried for a moment (the
 * wrapper may not have written it yet), then means there is nothing left to kill. A killer that cannot run
 * at all (a fork bomb holds every pid) is retried with backoff, then `onUnkillable` decides (the driver
 * deletes the Pod: the claim keeps the data, the next use gets a fresh Pod).
 */
export async function killProcessGroup(
  executor: PodExecutor,
  pidFile: string,
  onUnkillable: () => Promise<void>,
) {
  let delay = 20;
  let missing = 0;
  for (let failures = 0; failures < 10;) {
    try {
      const { exitCode } = await executor.run(["/bin/sh", "-c", KILLER, pidFile]);
      if (exitCode === 0 || (exitCode === 3 && ++missing >= 5)) return;
    } catch {
      failures++;
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 1_000);
  }
  await onUnkillable();
}

/** The port's exec: streamed output (capped copy), exit code, stdin with EOF, timeout and abort killing the group. */
export async function runCommand(
  executor: PodExecutor,
  command: readonly string[],
  options: ExecOptions & { cwd: string; onUnkillable: () => Promise<void> },
): Promise<ExecResult> {
  if (command.length === 0) throw new AppError("BAD_REQUEST", "exec needs a command");
  const env = Object.entries(options.env ?? {});
  for (const [name] of env) {
    if (!ENV_NAME.test(name)) throw new AppError("BAD_REQUEST", `invalid environment variable name: ${name}`);
  }
  if (options.signal?.aborted) return abortedBeforeStart();
  const output = new ExecOutput(options);
  const pidFile = `/tmp/.berth-exec-${randomBytes(8).toString("hex")}.pid`;
  const argv = [
    "setsid",
    "-w",
    "/bin/sh",
    "-c",
    WRAPPER,
    pidFile,
    options.cwd,
    String(env.length),
    ...env.map(([name, value]) => `${name}=${value}`),
    ...command,
  ];
  const handle = await executor.start(argv, {
    stdin: options.stdin,
    sink: (type, chunk) => {
      output.push(type, chunk);
      return true;
    },
  });

  const result = await awaitExec(
    {
      finished: handle.finished,
      kill: async () => {
        await killProcessGroup(executor, pidFile, options.onUnkillable);
        // The output ends once every holder of the pipe is gone; a grandchild that left the group could keep
        // it open forever, so stop waiting after a grace period.
        const grace = setTimeout(() => handle.close(), 5_000);
        await handle.finished.catch(() => undefined);
        clearTimeout(grace);
      },
    },
    output,
    options,
  );
  // setsid reports the group we killed ("child N did not exit normally"): our doing, not the command's.
  const killedByUs = result.timedOut || result.killed;
  return killedByUs ? { ...result, stderr: withoutSetsidNotice(result.stderr) } : result;
}
