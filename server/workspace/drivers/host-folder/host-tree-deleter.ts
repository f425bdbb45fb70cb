import { existsSync, type Dirent } from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";

/** How far a deletion got: entries removed so far (a resumed deletion counts from zero again). */
export type TreeDeletionProgress = { files: number; directories: number };

type DeleteTreeOptions = {
  /** Stops the deletion between two batches (it throws the signal's reason); running it again resumes. */
  signal?: AbortSignal | undefined;
  /**
   * Called after every batch, awaited: a purge job renews its claims here (and may throw to stop, e.g.
   * when it lost its claim). Keep it cheap or throttle it.
   */
  onProgress?: ((progress: TreeDeletionProgress) => unknown) | undefined;
  /** Entries removed between two turns of the event loop (default 256). */
  batchSize?: number;
  /** Unlinks in flight at once (default 32; the libuv pool runs 4 at a time anyway). */
  concurrency?: number;
};

const IS_LINUX_PROC = process.platform === "linux" && existsSync("/proc/self/fd");
const DIRECTORY_FLAGS = fsp.constants.O_RDONLY | fsp.constants.O_DIRECTORY | fsp.constants.O_NOFOLLOW;

/**
 * `rm -rf root` that never holds the event loop: fs.promises.rm on Node 20 stalled a worker's loop for
 * 11-16 s on a million files (its lock lapsed, SIGTERM went unanswered). This walks iteratively (no
 * recursion: any depth), streams each directory with opendir, unlinks at most `batchSize` entries with
 * bounded concurrency, then yields a turn (setImmediate), checks `signal` and reports progress.
 * Idempotent: a deletion stopped anywhere (abort, crash) is finished by running it again; what is gone
 * already is skipped. Symbolic links are removed, never followed; on Linux each directory is opened
 * without following a link and checked to be where the walk expects it, so a directory swapped for a
 * symlink mid-walk (an agent's process still running) cannot redirect the deletion outside `root`.
 */
export async function deleteHostTree(
  root: string,
  options: DeleteTreeOptions = {},
): Promise<TreeDeletionProgress> {
  const progress: TreeDeletionProgress = { files: 0, directories: 0 };
  const batchSize = options.batchSize ?? 256;
  const concurrency = options.concurrency ?? 32;
  options.signal?.throwIfAborted();
  const top = await fsp.lstat(root).catch(ignoreMissing);
  if (!top) return progress;
  if (!top.isDirectory()) {
    await unlinkIgnoringMissing(root);
    progress.files++;
    return progress;
  }
  // The walk compares every opened directory with its expected real path, so it starts from the real one.
  const realRoot = await fsp.realpath(root);
  const afterBatch = async () => {
    await nextTurn();
    await options.onProgress?.({ ...progress });
    // After the report too: a stop asked for there deletes nothing more.
    options.signal?.throwIfAborted();
  };
  // Depth-first, post-order: a directory's children are pushed above it and removed before it.
  const stack: { dir: string; listed: boolean }[] = [{ dir: realRoot, listed: false }];
  let sinceYield = 0;
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    if (frame.listed) {
      stack.pop();
      await fsp.rmdir(frame.dir).catch(ignoreMissing);
      progress.directories++;
      if (++sinceYield >= batchSize) {
        sinceYield = 0;
        await afterBatch();
      }
      continue;
    }
    frame.listed = true;
    const subdirectories = await removeFilesOf(frame.dir, { batchSize, concurrency, progress, afterBatch });
    for (const name of subdirectories) stack.push({ dir: path.join(frame.dir, name), listed: false });
  }
  await options.onProgress?.({ ...progress });
  return progress;
}

/**
 * Unlinks every non-directory entry of `dir` in batches and returns its subdirectories' names. Entries are
 * unlinked while the listing goes on: POSIX leaves only entries added or removed after opendir unspecified,
 * and every other entry is still listed exactly once.
 */
async function removeFilesOf(
  dir: string,
  walk: {
    batchSize: number;
    concurrency: number;
    progress: TreeDeletionProgress;
    afterBatch: () => Promise<void>;
  },
): Promise<string[]> {
  const { batchSize, concurrency, progress, afterBatch } = walk;
  const opened = await openDirectory(dir);
  if (!opened) return [];
  const subdirectories: string[] = [];
  try {
    let batch: string[] = [];
    const flush = async () => {
      const names = batch;
      batch = [];
      for (let start = 0; start < names.length; start += concurrency) {
        const results = await Promise.all(
          names.slice(start, start + concurrency).map((name) => unlinkEntry(opened.via, name)),
        );
        results.forEach((result, index) => {
          if (result === "directory") subdirectories.push(names[start + index]!);
          else if (result === "unlinked") progress.files++;
        });
      }
      await afterBatch();
    };
    for await (const entry of opened.entries) {
      if (entry.isDirectory()) subdirectories.push(entry.name);
      else batch.push(entry.name);
      if (batch.length >= batchSize) await flush();
    }
    if (batch.length > 0) await flush();
  } finally {
    await opened.close();
  }
  return subdirectories;
}

type OpenedDirectory = {
  /** The path entries are reached through: the opened directory's fd link on Linux, else `dir`. */
  via: string;
  entries: AsyncIterable<Dirent>;
  close(): Promise<void>;
};

/** Opens `dir` (null when it is gone already), refusing one that is not where the walk expects it. */
async function openDirectory(dir: string): Promise<OpenedDirectory | null> {
  if (!IS_LINUX_PROC) {
    const listing = await fsp.opendir(dir, { bufferSize: 256 }).catch(ignoreMissing);
    return listing ? { via: dir, entries: listing, close: () => Promise.resolve() } : null;
  }
  const handle = await fsp.open(dir, DIRECTORY_FLAGS).catch(ignoreMissing);
  if (!handle) return null;
  try {
    const via = `/proc/self/fd/${handle.fd}`;
    // O_NOFOLLOW guards the last component; this guards every component above it.
    const real = await fsp.readlink(via);
    if (real !== dir)
      throw new Error(`refusing to delete in ${dir}: it resolves to ${real} (a swapped link)`);
    // for-await closes the listing when it ends or throws.
    const listing = await fsp.opendir(via, { bufferSize: 256 });
    return { via, entries: listing, close: () => handle.close() };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** Unlinks one entry; a directory (its type unknown to the listing) is reported, not unlinked. */
async function unlinkEntry(via: string, name: string): Promise<"unlinked" | "gone" | "directory"> {
  try {
    await fsp.unlink(path.join(via, name));
    return "unlinked";
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return "gone";
    if (code === "EISDIR" || code === "EPERM") {
      const info = await fsp.lstat(path.join(via, name)).catch(ignoreMissing);
      if (!info) return "gone";
      if (info.isDirectory()) return "directory";
    }
    throw error;
  }
}

async function unlinkIgnoringMissing(target: string): Promise<void> {
  await fsp.unlink(target).catch(ignoreMissing);
}

function ignoreMissing(error: unknown): null {
  if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
  throw error;
}
