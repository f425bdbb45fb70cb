import { PassThrough } from "node:stream";
import type * as NodePtyModule from "node-pty";
import { AppError } from "@/server/shared/errors";
import type { PtyProcess } from "./port";

/**
 * A pseudo-terminal on THIS host (node-pty), for backends whose commands are host processes (the confined
 * `local` backend runs its sandbox on it). node-pty is a native add-on: it is loaded on the first terminal
 * only, so a process that never opens one never loads it.
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
      throw new AppError("UNAVAILABLE", `node-pty could not be loaded: ${String(error)}`, {
        userMessage: "Terminals are not available on this server (its node-pty add-on did not load).",
      });
    },
  );
  return loading;
}

/** Bounds of a terminal size: xterm.js never asks for more, and a zero or negative size is an error. */
const PTY_MAX_COLS = 1000;
const PTY_MAX_ROWS = 500;

export function assertPtySize(cols: number, rows: number): void {
  const ok = (n: number, max: number) => Number.isInteger(n) && n >= 1 && n <= max;
  if (!ok(cols, PTY_MAX_COLS) || !ok(rows, PTY_MAX_ROWS)) {
    throw new AppError("BAD_REQUEST", `terminal size ${cols}x${rows}`, {
      userMessage: `A terminal is 1–${PTY_MAX_COLS} columns by 1–${PTY_MAX_ROWS} rows.`,
    });
  }
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
