import { randomBytes } from "node:crypto";
import { PassThrough } from "node:stream";
import { AppError } from "@/server/shared/errors";
import { assertPtySize } from "@/server/workspace/drivers/pty-size";
import { DEFAULT_PTY_COMMAND, type PtyOptions, type PtyProcess } from "@/server/workspace/drivers/port";
import { openExec } from "./kube-exec";
import { ENV_NAME, killProcessGroup, type PodExecutor } from "./pod-exec";

/**
 * The terminal's wrapper (the exec's first process, a session leader with the terminal as its controlling
 * tty): records its pid for the kill, enters the cwd, applies the first size from inside (a resize frame
 * sent before the runtime attached could be lost), then runs the shell as its child under `env`.
 * Arguments: $0 pid file, $1 cwd, $2 cols, $3 rows, then `env NAME=value … command`.
 */
const PTY_WRAPPER = [
  'echo $$ > "$0" || exit 126',
  'cd -- "$1" || { rm -f "$0"; exit 127; }',
  'stty cols "$2" rows "$3" 2>/dev/null',
  "shift 3",
  '"$@"; rc=$?',
  'rm -f "$0"',
  "exit $rc",
].join("\n");

/** SIGHUP to the terminal's process group first: an interactive bash passes it to its jobs and exits. */
const HANGUP = 'read -r pid < "$0" 2>/dev/null && kill -HUP -"$pid" 2>/dev/null; exit 0';

/**
 * A Kubernetes terminal: `pods/exec` with `tty=true` and stdin in the workspace container (its user and
 * security context, like every command), resized over the exec's resize channel. Kill: hang the session
 * up, then SIGKILL its process group from a second exec (closing the socket alone leaves it running).
 */
export async function openPodPty(
  executor: PodExecutor,
  options: PtyOptions & { cwd: string; onUnkillable: () => Promise<void> },
): Promise<PtyProcess> {
  assertPtySize(options.cols, options.rows);
  const env = Object.entries({ TERM: "xterm-256color", ...options.env });
  for (const [name] of env) {
    if (!ENV_NAME.test(name)) throw new AppError("BAD_REQUEST", `invalid environment variable name: ${name}`);
  }
  const pidFile = `/tmp/.berth-pty-${randomBytes(8).toString("hex")}.pid`;
  const output = new PassThrough();
  const argv = [
    "/bin/sh",
    "-c",
    PTY_WRAPPER,
    pidFile,
    options.cwd,
    String(options.cols),
    String(options.rows),
    "env",
    ...env.map(([name, value]) => `${name}=${value}`),
    ...(options.command ?? DEFAULT_PTY_COMMAND),
  ];
  const channel = await openExec(executor.kube.kc, executor.target, argv, {
    stdin: true,
    tty: true,
    sinks: { stdout: (chunk) => output.write(chunk), stderr: (chunk) => output.write(chunk) },
  });
  output.on("drain", () => channel.resume());
  let ended = false;
  let killed = false;
  const exited = channel.done.then((outcome) => {
    ended = true;
    output.end();
    return { exitCode: killed || outcome.exitCode === null ? -1 : outcome.exitCode };
  });
  return {
    output,
    exited,
    write(data) {
      if (!ended) void channel.write(typeof data === "string" ? Buffer.from(data) : Buffer.from(data));
    },
    resize: (cols, rows) =>
      new Promise<void>((resolve) => {
        assertPtySize(cols, rows); // a throw here rejects
        if (!ended) channel.resize(cols, rows);
        resolve();
      }),
    async kill() {
      if (!ended) {
        killed = true;
        await executor.run(["/bin/sh", "-c", HANGUP, pidFile]).catch(() => undefined);
        await killProcessGroup(executor, pidFile, options.onUnkillable);
        // A job in a process group of its own that ignores SIGHUP could hold the terminal open.
        const grace = setTimeout(() => channel.close(), 5_000);
        await exited;
        clearTimeout(grace);
      }
      await exited;
    },
  };
}
