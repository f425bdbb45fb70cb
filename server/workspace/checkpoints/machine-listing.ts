import { AppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { WORKSPACE_LAYOUT } from "@/server/workspace/layout";

/**
 * The stat walk of a checkpoint: every file, folder and link under the machine's workdir, listed INSIDE the
 * machine by GNU find (one exec, whatever the backend: host folder, bubblewrap, container, sandbox, Pod), as
 * the workspace user and in its confinement. No file is read here; which ones need reading is decided by
 * comparing size and mtime with the previous checkpoint.
 */

/** Paths of the workdir that Berth owns and rewrites itself, never checkpointed or restored. */
export const CHECKPOINT_EXCLUDED_PATHS = [
  WORKSPACE_LAYOUT.mcpFile,
  WORKSPACE_LAYOUT.skillSeedDir,
  ".berth-checkpoint",
] as const;

export type ListedEntry =
  | { path: string; type: "file"; mode: number; size: number; mtimeMs: number }
  | { path: string; type: "dir"; mode: number }
  | { path: string; type: "symlink"; target: string };

/** A workspace larger than this is refused a checkpoint (typed, not an outage). */
export const MAX_CHECKPOINT_ENTRIES = 1_000_000;

const FIELDS_PER_ENTRY = 5;

/** Lists the workdir (excluded paths pruned), parents before their contents. */
export async function listMachineTree(
  machine: WorkspaceMachine,
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<ListedEntry[]> {
  const prune = CHECKPOINT_EXCLUDED_PATHS.flatMap((excluded, index) => [
    ...(index > 0 ? ["-o"] : []),
    "-path",
    `./${excluded}`,
  ]);
  // %y type, %m permission bits (octal), %s size, %T@ mtime (s.fraction), %P path, %l link target.
  const argv = [
    "find",
    ".",
    "-mindepth",
    "1",
    "(",
    ...prune,
    ")",
    "-prune",
    "-o",
    "-printf",
    "%y\\0%m\\0%s/%T@\\0%P\\0%l\\0",
  ];
  const entries: ListedEntry[] = [];
  let fields: string[] = [];
  let pending: Buffer = Buffer.alloc(0);
  let overflow = false;
  // One decode and one split per chunk, up to its last NUL (a NUL byte is never inside a UTF-8 sequence).
  const take = (chunk: Buffer) => {
    if (overflow) return;
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    const last = pending.lastIndexOf(0);
    if (last === -1) return;
    const parts = pending.toString("utf8", 0, last).split("\0");
    pending = pending.subarray(last + 1);
    if (fields.length > 0) parts.unshift(...fields.splice(0));
    let at = 0;
    for (; at + FIELDS_PER_ENTRY <= parts.length; at += FIELDS_PER_ENTRY) {
      const entry = toEntry(parts[at]!, parts[at + 1]!, parts[at + 2]!, parts[at + 3]!, parts[at + 4]!);
      if (entry) entries.push(entry);
    }
    fields = parts.slice(at);
    if (entries.length > MAX_CHECKPOINT_ENTRIES) overflow = true;
  };
  const result = await machine.exec(argv, {
    cwd: machine.workdir,
    onStdout: take,
    maxBufferBytes: 1,
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
  });
  if (overflow) {
    throw new AppError("PAYLOAD_TOO_LARGE", "The workspace has too many files to checkpoint", {
      details: { limit: MAX_CHECKPOINT_ENTRIES },
    });
  }
  // find exits 1 when a folder vanished or could not be read mid-walk: what it listed still stands.
  if (result.timedOut || result.killed || (result.exitCode !== 0 && result.exitCode !== 1)) {
    throw new AppError(
      "UNAVAILABLE",
      `Listing the workspace's files failed (exit ${result.exitCode}${result.timedOut ? ", timed out" : ""}): ${result.stderr.toString().slice(0, 300)}`,
    );
  }
  return entries;
}

function toEntry(
  type: string,
  mode: string,
  sizeAndTime: string,
  path: string,
  target: string,
): ListedEntry | null {
  if (!path) return null;
  const permissions = Number.parseInt(mode, 8) & 0o7777;
  if (type === "d") return { path, type: "dir", mode: permissions };
  if (type === "l") return { path, type: "symlink", target };
  if (type !== "f") return null; // sockets, fifos, devices: nothing a checkpoint can hold
  const slash = sizeAndTime.indexOf("/");
  return {
    path,
    type: "file",
    mode: permissions,
    size: Number(sizeAndTime.slice(0, slash)),
    mtimeMs: mtimeMsOf(sizeAndTime.slice(slash + 1)),
  };
}

/** find's `%T@` ("1733550000.1234567890") in whole microseconds, the same on every read of one file. */
function mtimeMsOf(seconds: string): number {
  const [whole, fraction = ""] = seconds.split(".");
  const micros = (fraction + "000000").slice(0, 6);
  return Number(whole) * 1000 + Number(micros) / 1000;
}
