import type { ExecOptions, ExecResult } from "@/server/workspace/drivers/port";

/** The port's default cap on the output an exec keeps (each stream; the callbacks still see all of it). */
export const DEFAULT_MAX_BUFFER_BYTES = 10 * 1024 * 1024;

export type OutputStream = "stdout" | "stderr";

/** One stream's chunks up to a cap, remembering whether anything was dropped. */
export class CappedOutput {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly cap: number) {}

  push(chunk: Buffer): void {
    const room = this.cap - this.size;
    if (room <= 0) {
      this.truncated ||= chunk.length > 0;
      return;
    }
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (kept.length < chunk.length) this.truncated = true;
    this.chunks.push(kept);
    this.size += kept.length;
  }

  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.size);
  }
}

/**
 * Both streams of one exec as the port defines them: every chunk goes to the caller's callback as it
 * arrives, and a capped copy is kept for the result (a command may print gigabytes; the caller asked for
 * at most `maxBufferBytes` of each stream back).
 */
export class ExecOutput {
  private readonly kept: Record<OutputStream, CappedOutput>;

  constructor(private readonly options: Pick<ExecOptions, "maxBufferBytes" | "onStdout" | "onStderr">) {
    const cap = options.maxBufferBytes ?? DEFAULT_MAX_BUFFER_BYTES;
    this.kept = { stdout: new CappedOutput(cap), stderr: new CappedOutput(cap) };
  }

  push(stream: OutputStream, chunk: Buffer): void {
    (stream === "stdout" ? this.options.onStdout : this.options.onStderr)?.(chunk);
    this.kept[stream].push(chunk);
  }

  get stdout(): Buffer {
    return this.kept.stdout.toBuffer();
  }

  get stderr(): Buffer {
    return this.kept.stderr.toBuffer();
  }

  get truncated(): boolean {
    return this.kept.stdout.truncated || this.kept.stderr.truncated;
  }
}

/** The result of an exec the caller had aborted before it started: nothing ran. */
export function abortedBeforeStart(): ExecResult {
  return {
    exitCode: -1,
    stdout: Buffer.alloc(0),
    stderr: Buffer.alloc(0),
    timedOut: false,
    killed: true,
    truncated: false,
  };
}

/** What a driver hands the shared runner once its command started. */
export type StartedCommand = {
  /** The exit code once the output ended (null or -1 when the driver cannot tell). */
  finished: Promise<number | null>;
  /** Kills the command with everything it started, and resolves once its output ended or was given up. */
  kill(): Promise<void>;
  /** Runs after the command ended and any kill finished, before the result is read (flush a decoder). */
  onEnd?(): void;
};

/**
 * The port's exec around a started command: `timeoutMs` and the abort signal kill it (once, whichever
 * comes first), and the result says which. The exit code of a killed command is -1: what it reports
 * after a SIGKILL is the kill's doing, not the command's.
 */
export async function awaitExec(
  command: StartedCommand,
  output: ExecOutput,
  options: Pick<ExecOptions, "timeoutMs" | "signal">,
): Promise<ExecResult> {
  let timedOut = false;
  let killed = false;
  const killing: { pending: Promise<void> | null } = { pending: null };
  const kill = () => {
    killing.pending ??= command.kill();
  };
  const timer =
    options.timeoutMs !== undefined
      ? setTimeout(() => {
          timedOut = true;
          kill();
        }, options.timeoutMs)
      : null;
  const onAbort = () => {
    killed = true;
    kill();
  };
  options.signal?.addEventListener("abort", onAbort, { once: true });
  let exitCode: number | null;
  try {
    exitCode = await command.finished;
  } finally {
    if (timer) clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }
  if (killing.pending) await killing.pending;
  command.onEnd?.();
  return {
    exitCode: timedOut || killed || exitCode === null ? -1 : exitCode,
    stdout: output.stdout,
    stderr: output.stderr,
    timedOut,
    killed,
    truncated: output.truncated,
  };
}
