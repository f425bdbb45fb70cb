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
const CHECKPOINT_EXCLUDED_PATHS = [
  WORKSPACE_LAYOUT.mcpFile,
  WORKSPACE_LAYOUT.skillSeedDir,
  ".berth-checkpoint",
] as const;

export type ListedEntry =
  | { path: string; type: "file"; mode: number; size: number; mtimeMs: number }
  | { path: string; type: "dir"; mode: number }
  | { path: string; type: "symlink"; target: string };

/** A workspace larger than this is refused a checkpoint (typed, not an outage). */
const MAX_CHECKPOINT_ENTRIES = 1_000_000;

const FIELDS_PER_ENTRY = 5;

/** Lists the workdir (excluded paths pruned), parents before their contents. */
export async function listMachineTree(
  machine: WorkspaceMachine,
  options: {
    signal?: AbortSignal;
    timeoutMs?: number;
    /**
     * The previous listing of this workdir: an entry found unchanged at the same position is returned as
     * the previous object itself (nothing allocated for it; the caller may compare by identity).
     */
    prior?: readonly ListedEntry[] | null;
  } = {},
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
  let carry = "";
  let pending: Buffer = Buffer.alloc(0);
  let overflow = false;
  // One decode per chunk, up to its last NUL (a NUL byte is never inside a UTF-8 sequence); records are
  // parsed in place (numbers from the characters, only the path and a link's target sliced): a listing of
  // 100k entries makes 100k objects and their paths, not half a million strings.
  const take = (chunk: Buffer) => {
    if (overflow) return;
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    const last = pending.lastIndexOf(0);
    if (last === -1) return;
    const text = carry + pending.toString("utf8", 0, last + 1);
    pending = pending.subarray(last + 1);
    let at = 0;
    const ends: number[] = [];
    for (;;) {
      ends.length = 0;
      for (let from = at; ends.length < FIELDS_PER_ENTRY; from = ends[ends.length - 1]! + 1) {
        const nul = text.indexOf("\0", from);
        if (nul === -1) break;
        ends.push(nul);
      }
      if (ends.length < FIELDS_PER_ENTRY) break;
      const entry = parseRecord(text, at, ends, options.prior?.[entries.length]);
      if (entry) entries.push(entry);
      at = ends[FIELDS_PER_ENTRY - 1]! + 1;
    }
    carry = text.slice(at);
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

/** One record, `type\0mode\0size/seconds.fraction\0path\0target\0`, starting at `at`, its NULs at `ends`. */
function parseRecord(
  text: string,
  at: number,
  ends: readonly number[],
  prior: ListedEntry | undefined,
): ListedEntry | null {
  const [typeEnd, modeEnd, statEnd, pathEnd, targetEnd] = ends as [number, number, number, number, number];
  if (pathEnd === statEnd + 1) return null;
  const type = text.charCodeAt(at);
  const samePath =
    prior !== undefined &&
    prior.path.length === pathEnd - statEnd - 1 &&
    text.startsWith(prior.path, statEnd + 1);
  const path = samePath ? prior.path : text.slice(statEnd + 1, pathEnd);
  let mode = 0;
  for (let i = typeEnd + 1; i < modeEnd; i++) mode = mode * 8 + (text.charCodeAt(i) - 48);
  mode &= 0o7777;
  if (type === 100 /* d */)
    return samePath && prior.type === "dir" && prior.mode === mode ? prior : { path, type: "dir", mode };
  if (type === 108 /* l */) {
    const target = text.slice(pathEnd + 1, targetEnd);
    return samePath && prior.type === "symlink" && prior.target === target
      ? prior
      : { path, type: "symlink", target };
  }
  if (type !== 102 /* f */) return null; // sockets, fifos, devices: nothing a checkpoint can hold
  let i = modeEnd + 1;
  let size = 0;
  for (; i < statEnd && text.charCodeAt(i) !== 47 /* / */; i++) size = size * 10 + (text.charCodeAt(i) - 48);
  let seconds = 0;
  for (i++; i < statEnd && text.charCodeAt(i) !== 46 /* . */; i++)
    seconds = seconds * 10 + (text.charCodeAt(i) - 48);
  // find's `%T@` ("1733550000.1234567890") in whole microseconds, the same on every read of one file.
  let micros = 0;
  let digits = 0;
  for (i++; i < statEnd && digits < 6; i++, digits++) micros = micros * 10 + (text.charCodeAt(i) - 48);
  for (; digits < 6; digits++) micros *= 10;
  const mtimeMs = seconds * 1000 + micros / 1000;
  if (
    samePath &&
    prior.type === "file" &&
    prior.mode === mode &&
    prior.size === size &&
    prior.mtimeMs === mtimeMs
  )
    return prior;
  return { path, type: "file", mode, size, mtimeMs };
}
