import { randomBytes } from "node:crypto";
import { PassThrough } from "node:stream";
import type Docker from "dockerode";
import { assertPtySize } from "@/server/workspace/drivers/pty-size";
import { DEFAULT_PTY_COMMAND, type PtyOptions, type PtyProcess } from "@/server/workspace/drivers/port";
import { killProcessGroup, runRootChore, waitForExitCode, type ExecIdentity } from "./docker-exec";

/**
 * The terminal's wrapper: records its pid (the exec is a session leader, so the pid is also the session's
 * and the first process group's id), applies the first size from inside (the engine's exec resize only
 * works once the exec runs, and API 1.41 has no ConsoleSize), then runs the shell as its child.
 */
const PTY_WRAPPER =
  'echo $$ > "$0"; stty cols "$1" rows "$2" 2>/dev/null; shift 2; "$@"; rc=$?; rm -f "$0"; exit $rc';

/** SIGHUP to the terminal's first process group: an interactive bash passes it on to its jobs and exits. */
const HANGUP = 'read -r pid < "$0" 2>/dev/null && kill -HUP -"$pid" 2>/dev/null; exit 0';

/**
 * A Docker terminal: `docker exec` with `Tty: true` as the workspace user, resized through the engine's
 * exec resize (the container's kernel sends SIGWINCH). Output is the raw hijacked stream (a TTY exec has no
 * stdout/stderr framing). Kill: hang the session up, then SIGKILL the wrapper's process group.
 */
export async function openDockerPty(
  container: Docker.Container,
  identity: ExecIdentity,
  options: PtyOptions,
): Promise<PtyProcess> {
  assertPtySize(options.cols, options.rows);
  const pidFile = `/tmp/.berth-pty-${randomBytes(8).toString("hex")}.pid`;
  const command = options.command ?? DEFAULT_PTY_COMMAND;
  const exec = await container.exec({
    Cmd: ["/bin/sh", "-c", PTY_WRAPPER, pidFile, String(options.cols), String(options.rows), ...command],
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: true,
    User: identity.user,
    WorkingDir: identity.cwd,
    Env: Object.entries({ TERM: "xterm-256color", ...identity.env }).map(([k, v]) => `${k}=${v}`),
  });
  const stream = await exec.start({ hijack: true, stdin: true, Tty: true });
  const output = new PassThrough();
  let ended = false;
  let killed = false;
  stream.on("data", (chunk: Buffer) => output.write(chunk));
  const closed = new Promise<void>((resolve) => {
    const finish = () => {
      if (ended) return;
      ended = true;
      output.end();
      resolve();
    };
    stream.once("end", finish);
    stream.once("close", finish);
    stream.once("error", finish);
  });
  const exited = closed.then(() =>
    waitForExitCode(exec).then((exitCode) => ({ exitCode: killed ? -1 : exitCode })),
  );
  return {
    output,
    exited,
    write(data) {
      if (!ended) stream.write(typeof data === "string" ? data : Buffer.from(data));
    },
    async resize(cols, rows) {
      assertPtySize(cols, rows);
      if (!ended) await exec.resize({ h: rows, w: cols });
    },
    async kill() {
      if (!ended) {
        killed = true;
        await runRootChore(container, ["/bin/sh", "-c", HANGUP, pidFile]).catch(() => undefined);
        await killProcessGroup(container, pidFile);
        // A job the shell put in a process group of its own and that ignores SIGHUP could hold the
        // terminal open: stop waiting for it after a grace period.
        const grace = setTimeout(() => stream.destroy(), 5_000);
        await closed;
        clearTimeout(grace);
      }
      await exited.catch(() => undefined);
    },
  };
}
