import { spawn } from "node:child_process";
import { Readable } from "node:stream";
import { CappedOutput, DEFAULT_MAX_BUFFER_BYTES } from "@/server/workspace/drivers/exec-output/exec-output";
import type { ExecOptions, ExecResult } from "@/server/workspace/drivers/port";

/** What a sandboxing caller adds to a plain host spawn (the bubblewrap backend). */
export type SpawnExtras = {
  /** Open file descriptors handed to the child as fds 3, 4, ... (closed by the caller afterwards). */
  extraFds?: number[];
  onSpawn?: (pid: number) => void;
  onExit?: (pid: number) => void;
};

/**
 * Runs argv on the host without a shell. The child leads its own process group (`detached`) so a timeout
 * or an abort kills everything it started, not just the direct child (a `sh -c` wrapper would otherwise
 * leave its grandchildren holding the pipes open).
 */
export function execOnHost(
  command: readonly string[],
  options: ExecOptions & { cwd: string; env: Record<string, string>; spawn?: SpawnExtras },
): Promise<ExecResult> {
  const [file, ...args] = command;
  const maxBufferBytes = options.maxBufferBytes ?? DEFAULT_MAX_BUFFER_BYTES;
  const stdout = new CappedOutput(maxBufferBytes);
  const stderr = new CappedOutput(maxBufferBytes);
  if (file === undefined) {
    return Promise.resolve(spawnFailure(stdout, stderr, "empty command"));
  }
  if (options.signal?.aborted) {
    return Promise.resolve({ ...spawnFailure(stdout, stderr, "aborted"), exitCode: -1, killed: true });
  }

  return new Promise<ExecResult>((resolve) => {
    let timedOut = false;
    let killed = false;
    let settled = false;
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(file, args, {
        cwd: options.cwd,
        env: options.env as NodeJS.ProcessEnv,
        detached: true,
        stdio: ["pipe", "pipe", "pipe", ...(options.spawn?.extraFds ?? [])],
        windowsHide: true,
      });
      if (child.pid !== undefined) options.spawn?.onSpawn?.(child.pid);
    } catch (error) {
      resolve(spawnFailure(stdout, stderr, errorText(error)));
      return;
    }

    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // The group is already gone; killing the direct child is the fallback.
        child.kill("SIGKILL");
      }
    };
    const timer =
      options.timeoutMs !== undefined && options.timeoutMs > 0
        ? setTimeout(() => {
            timedOut = true;
            killGroup();
          }, options.timeoutMs)
        : undefined;
    const onAbort = () => {
      killed = true;
      killGroup();
    };
    options.signal?.addEventListener("abort", onAbort, { once: true });

    const finish = (result: ExecResult) => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      resolve(result);
    };

    child.stdout?.on("data", (chunk: Buffer) => {
      stdout.push(chunk);
      options.onStdout?.(chunk);
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr.push(chunk);
      options.onStderr?.(chunk);
    });
    child.on("error", (error) => {
      // 'error' without a pid means the process never started (ENOENT, EACCES, bad cwd).
      if (child.pid === undefined) finish(spawnFailure(stdout, stderr, errorText(error)));
    });
    child.on("close", (code) => {
      if (child.pid !== undefined) options.spawn?.onExit?.(child.pid);
      finish({
        exitCode: timedOut || killed || code === null ? -1 : code,
        stdout: stdout.toBuffer(),
        stderr: stderr.toBuffer(),
        timedOut,
        killed,
        truncated: stdout.truncated || stderr.truncated,
      });
    });

    writeStdin(child.stdin, options.stdin);
  });
}

function writeStdin(stdin: NodeJS.WritableStream | null, input: ExecOptions["stdin"]): void {
  if (!stdin) return;
  // A child that exits without reading its stdin makes the write fail with EPIPE; that is not our error.
  stdin.on("error", () => undefined);
  if (input === undefined) {
    stdin.end();
  } else if (input instanceof Readable) {
    input.pipe(stdin);
  } else {
    stdin.end(input);
  }
}

function spawnFailure(stdout: CappedOutput, stderr: CappedOutput, message: string): ExecResult {
  return {
    exitCode: 127,
    stdout: stdout.toBuffer(),
    stderr: Buffer.concat([stderr.toBuffer(), Buffer.from(message)]),
    timedOut: false,
    killed: false,
    truncated: false,
  };
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
