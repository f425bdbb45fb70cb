import { randomBytes } from "node:crypto";
import { Readable, type Duplex } from "node:stream";
import type Docker from "dockerode";
import { AppError } from "@/server/shared/errors";
import type { ExecOptions, ExecResult } from "@/server/workspace/drivers/port";
import {
  abortedBeforeStart,
  awaitExec,
  ExecOutput,
} from "@/server/workspace/drivers/exec-output/exec-output";
import { demuxDockerStream, type FrameSink } from "./docker-demux";

/** Who runs a command and from where: the workspace user for agent commands, root for Berth's own chores. */
export type ExecIdentity = { user: string; env: Record<string, string>; cwd: string };

export type ExecHandle = {
  /** Exit code once the output ended and Docker reports the process gone (-1 when it cannot tell). */
  finished: Promise<number>;
  /** Resumes the output after a sink asked for backpressure. */
  resume(): void;
  /** SIGKILLs the command's whole process group (a second exec reads the pid the wrapper recorded). */
  kill(): Promise<void>;
};

/**
 * Docker exec processes start as session leaders, so the wrapper shell's pid is also its process
 * group id: recording it lets `kill` take down the command and every child it forked, which the exec
 * API itself cannot do. The wrapper stays the parent (no `exec`) so it can delete its pid file.
 */
const WRAPPER = 'echo $$ > "$0"; "$@"; rc=$?; rm -f "$0"; exit $rc';
const KILLER = [
  // Fork-free until the kill: under a fork bomb every fork fails, but builtins (read, kill) still work.
  'read -r pid < "$0" 2>/dev/null',
  // dash's kill takes no "--"; a negative pid addresses the process group.
  'if [ -n "$pid" ]; then kill -9 -"$pid" 2>/dev/null; rm -f "$0"; exit 0; fi',
  "exit 3",
].join("; ");

/**
 * Kills the command's process group from a second exec. The killer itself needs a free pid, which a fork
 * bomb may hold for a while, and the wrapper may not have written its pid file yet: retry with backoff.
 * When no killer can run at all, the container is killed; the manager's liveness check then replaces it
 * on the next use (data stays in the bind mount).
 */
export async function killProcessGroup(container: Docker.Container, pidFile: string): Promise<void> {
  let delay = 20;
  for (let attempt = 0; attempt < 10; attempt++) {
    try {
      const result = await runRootChore(container, ["/bin/sh", "-c", KILLER, pidFile]);
      if (result.exitCode === 0) return;
    } catch {
      // exec could not start (no free pid, or the container is gone): retry, then escalate
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 1_000);
  }
  await container.kill().catch(() => undefined);
}

export async function startExec(
  container: Docker.Container,
  argv: readonly string[],
  identity: ExecIdentity,
  io: { stdin?: Readable | Uint8Array | string | undefined; sink: FrameSink },
): Promise<ExecHandle> {
  if (argv.length === 0) throw new AppError("BAD_REQUEST", "exec needs a command");
  const pidFile = `/tmp/.berth-exec-${randomBytes(8).toString("hex")}.pid`;
  const hasStdin = io.stdin !== undefined;
  const exec = await container.exec({
    Cmd: ["/bin/sh", "-c", WRAPPER, pidFile, ...argv],
    AttachStdin: hasStdin,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    User: identity.user,
    WorkingDir: identity.cwd,
    Env: Object.entries(identity.env).map(([key, value]) => `${key}=${value}`),
  });
  const stream = await exec.start({ hijack: true, stdin: hasStdin });
  const demux = demuxDockerStream(stream, io.sink);
  if (hasStdin) feedStdin(stream, io.stdin!);

  const finished = demux.done.then(() => waitForExitCode(exec));
  return {
    finished,
    resume: demux.resume,
    kill: async () => {
      await killProcessGroup(container, pidFile);
      // The output ends when every process holding the pipe is gone; a daemonised grandchild in its
      // own session could keep it open forever, so stop waiting after a grace period.
      const grace = setTimeout(() => stream.destroy(), 5_000);
      await finished.catch(() => undefined);
      clearTimeout(grace);
    },
  };
}

/** Streams stdin into the hijacked connection, then half-closes it so the command sees EOF. */
function feedStdin(stream: Duplex, stdin: Readable | Uint8Array | string): void {
  const source = stdin instanceof Readable ? stdin : Readable.from([Buffer.from(stdin)]);
  source.on("error", () => stream.end());
  source.pipe(stream, { end: true });
  // The command may exit without reading all of stdin: that is its right, not an error.
  stream.on("error", () => source.unpipe(stream));
}

/** Docker can report the output closed a moment before the exec is marked finished: poll briefly. */
export async function waitForExitCode(exec: Docker.Exec): Promise<number> {
  let delay = 5;
  for (let attempt = 0; attempt < 12; attempt++) {
    const info = await exec.inspect();
    if (!info.Running) return info.ExitCode ?? -1;
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 200);
  }
  return -1;
}

/** Runs a short internal command as root, collecting (capped) output. */
export async function runRootChore(
  container: Docker.Container,
  argv: readonly string[],
  stdin?: Readable | Uint8Array | string,
): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const exec = await container.exec({
    Cmd: [...argv],
    AttachStdin: stdin !== undefined,
    AttachStdout: true,
    AttachStderr: true,
    User: "0:0",
    WorkingDir: "/",
  });
  const stream = await exec.start({ hijack: true, stdin: stdin !== undefined });
  const demux = demuxDockerStream(stream, (type, chunk) => {
    (type === "stdout" ? out : err).push(chunk);
    return true;
  });
  if (stdin !== undefined) feedStdin(stream, stdin);
  await demux.done;
  const exitCode = await waitForExitCode(exec);
  return {
    exitCode,
    stdout: Buffer.concat(out).toString("utf8"),
    stderr: Buffer.concat(err).toString("utf8"),
  };
}

/** The port's exec: collected output (capped), streaming callbacks, timeout and abort killing the group. */
export async function runExec(
  container: Docker.Container,
  argv: readonly string[],
  identity: ExecIdentity,
  options: ExecOptions,
): Promise<ExecResult> {
  if (options.signal?.aborted) return abortedBeforeStart();
  const output = new ExecOutput(options);
  const handle = await startExec(container, argv, identity, {
    stdin: options.stdin,
    sink: (type, chunk) => {
      output.push(type, chunk);
      return true;
    },
  });
  return awaitExec(handle, output, options);
}
