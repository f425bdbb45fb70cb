import { PassThrough } from "node:stream";
import type * as NodePtyModule from "node-pty";
import { AppError } from "@/server/shared/errors";
import type { PtyProcess } from "@/server/workspace/drivers/port";
import { assertPtySize } from "@/server/workspace/drivers/pty-size";

/**
 * A pseudo-terminal on THIS host (node-pty), for backends whose commands are host processes (the confined
 * `local` backend runs its sandbox on it). node-pty is a native add-on: it is loaded on the first terminal
 * only, so a process that never opens one never loads it. It is an optional dependency whose package ships
 * prebuilt binaries for Linux and macOS (x64, arm64), so `npm ci` needs no compiler there; where none fits
 * and none could be compiled it is missing, and only terminals fail (UNAVAILABLE, saying why).
 */
export type HostPtySpawn = {
  file: string;
  args: readonly string[];
  cols: number;
  rows: number;
  /** Host directory the first process starts in. */
  cwd: string;
  /** The whole environment of the first process (nothing of Berth's is inherited). */
  env: Record<string, string>;
  onSpawn?: (pid: number) => void;
  onExit?: (pid: number) => void;
};

type NodePty = typeof NodePtyModule;
let loading: Promise<NodePty> | null = null;

function loadNodePty(): Promise<NodePty> {
  loading ??= import("node-pty").then(
    (module) => (module as { default?: NodePty }).default ?? module,
    (error: unknown) => {
      loading = null;
      const platform = `${process.platform}-${process.arch}`;
      throw new AppError("UNAVAILABLE", `node-pty could not be loaded on ${platform}: ${String(error)}`, {
        cause: error,
        userMessage:
          `The terminal needs node-pty, which did not install on this server (${platform}): ` +
          "it ships prebuilt binaries for Linux and macOS on x64 and arm64; elsewhere `npm ci` must compile it " +
          "(python3, make and a C++ compiler). Everything else works without it.",
      });
    },
  );
  return loading;
}

export async function spawnHostPty(spawn: HostPtySpawn): Promise<PtyProcess> {
  assertPtySize(spawn.cols, spawn.rows);
  const nodePty = await loadNodePty();
  const child = nodePty.spawn(spawn.file, [...spawn.args], {
    name: spawn.env.TERM ?? "xterm-256color",
    cols: spawn.cols,
    rows: spawn.rows,
    cwd: spawn.cwd,
    env: spawn.env,
    // Raw bytes: a UTF-8 decode here would split multi-byte characters across reads.
    encoding: null,
  });
  const pid = child.pid;
  spawn.onSpawn?.(pid);
  const output = new PassThrough();
  let ended = false;
  child.onData((data: string | Buffer) => {
    if (!ended) output.write(typeof data === "string" ? Buffer.from(data, "utf8") : data);
  });
  const exited = new Promise<{ exitCode: number }>((resolve) => {
    child.onExit(({ exitCode, signal }) => {
      ended = true;
      spawn.onExit?.(pid);
      output.end();
      resolve({ exitCode: signal ? -1 : exitCode });
    });
  });
  return {
    output,
    exited,
    write(data) {
      if (!ended) child.write(typeof data === "string" ? data : Buffer.from(data));
    },
    resize: (cols, rows) =>
      new Promise<void>((resolve) => {
        assertPtySize(cols, rows); // a throw here rejects
        if (!ended) child.resize(cols, rows);
        resolve();
      }),
    async kill() {
      if (!ended) {
        // The first process is the sandbox's outer bwrap (or its wrappers): SIGKILL ends it, and with it
        // (--die-with-parent, pid namespace) everything the shell started.
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
      await exited;
    },
  };
}
