import { Readable } from "node:stream";
import tarStream from "tar-stream";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import type { CheckpointStore } from "./checkpoint-store";
import { listMachineTree, type ListedEntry } from "./machine-listing";
import { emptyIndex, rememberIndex, takeIndex } from "./capture-index";
import { updateTrees } from "./capture-trees";

/**
 * Records the machine's workdir as a checkpoint: a stat walk (machine-listing.ts), then only the files
 * whose size or mtime differ from the previous checkpoint are read and stored; every other file keeps the
 * previous checkpoint's blob. Cost: the walk, plus the k changed files, plus the trees on their paths.
 */
export type CaptureResult = {
  root: string;
  stats: {
    files: number;
    directories: number;
    /** Bytes of every file of the checkpoint (what a full copy would be). */
    totalBytes: number;
    /** Files read from the machine because they were new or changed since the previous checkpoint. */
    readFiles: number;
    /** Objects (blobs and trees) this checkpoint added to the store, and their bytes: what it costs. */
    storedObjects: number;
    storedBytes: number;
    /** Files listed but gone or unreadable by the time they were read (left out of the checkpoint). */
    skippedFiles: number;
  };
};

/** Above this many files to read, one archive of the workdir is cheaper than one exec per file. */
const PER_FILE_READ_LIMIT = 48;
/** Files up to this size are buffered out of the archive and stored concurrently, this many at a time. */
const BUFFERED_FILE_BYTES = 256 * 1024;
const WRITES_IN_FLIGHT = 16;
/** Changed files read one by one (below PER_FILE_READ_LIMIT), this many at a time. */
const READS_IN_FLIGHT = 4;

export async function captureCheckpoint(options: {
  machine: WorkspaceMachine;
  store: CheckpointStore;
  tenantId: string;
  /** Root tree of the workspace's previous checkpoint (null for the first). */
  previous: string | null;
  signal?: AbortSignal;
}): Promise<CaptureResult> {
  const { machine, store, tenantId, signal } = options;
  // The index first (from memory, usually): the walk hands back its unchanged entries as they were.
  const index = options.previous ? await takeIndex(store, tenantId, options.previous) : emptyIndex();
  const stats: CaptureResult["stats"] = {
    files: 0,
    directories: 0,
    totalBytes: 0,
    readFiles: 0,
    storedObjects: 0,
    storedBytes: 0,
    skippedFiles: 0,
  };
  // What differs from the index: one lookup per entry, nothing else for the unchanged ones.
  const changed: ListedEntry[] = [];
  const toRead: string[] = [];
  let fresh = false;
  const prior = index.listing;
  const listing = await listMachineTree(machine, { ...(signal ? { signal } : {}), prior });
  for (const [at, entry] of listing.entries()) {
    const listed = prior?.[at];
    if (listed === entry) {
      if (entry.type === "file") {
        stats.files += 1;
        stats.totalBytes += entry.size;
      } else if (entry.type === "dir") stats.directories += 1;
      continue;
    }
    const before = index.entries.get(entry.path);
    if (entry.type === "file") {
      stats.files += 1;
      stats.totalBytes += entry.size;
      if (before?.type === "file" && before.size === entry.size && before.mtimeMs === entry.mtimeMs) {
        if (before.mode !== entry.mode) changed.push(entry);
        continue;
      }
      toRead.push(entry.path);
    } else if (entry.type === "dir") {
      stats.directories += 1;
      if (before?.type === "dir" && before.mode === entry.mode) continue;
    } else if (before?.type === "symlink" && before.target === entry.target) continue;
    fresh ||= before === undefined;
    changed.push(entry);
  }
  const onStored = (stored: { hash: string; size: number; stored: boolean }) => {
    if (stored.stored) {
      stats.storedObjects += 1;
      stats.storedBytes += stored.size;
    }
  };
  const read =
    toRead.length > PER_FILE_READ_LIMIT
      ? await readThroughArchive(machine, store, tenantId, new Set(toRead), onStored)
      : await readEachFile(machine, store, tenantId, toRead, onStored, signal);
  stats.readFiles = read.size;
  stats.skippedFiles = toRead.length - read.size;
  if (stats.skippedFiles > 0) {
    const wanted = new Set(toRead);
    for (const entry of changed)
      if (entry.type === "file" && !read.has(entry.path) && wanted.has(entry.path)) {
        stats.files -= 1;
        stats.totalBytes -= entry.size;
      }
  }
  const root = await updateTrees(
    store,
    tenantId,
    listing,
    index,
    { changed, read, maybeRemoved: fresh || listing.length !== index.entries.size },
    (bytes) => onStored({ hash: "", size: bytes, stored: true }),
  );
  index.listing = stats.skippedFiles === 0 ? listing : null;
  rememberIndex(store, tenantId, index);
  return { root, stats };
}

async function readEachFile(
  machine: WorkspaceMachine,
  store: CheckpointStore,
  tenantId: string,
  paths: readonly string[],
  onStored: (stored: { hash: string; size: number; stored: boolean }) => void,
  signal: AbortSignal | undefined,
): Promise<Map<string, { hash: string; size: number }>> {
  const read = new Map<string, { hash: string; size: number }>();
  // A few at a time: each is a read from the machine and a few store operations, mostly waiting.
  let next = 0;
  const worker = async () => {
    while (next < paths.length) {
      signal?.throwIfAborted();
      const filePath = paths[next++]!;
      let data: Readable;
      try {
        data = await machine.readFile(filePath);
      } catch {
        continue; // gone or unreadable since the walk: left out, counted as skipped
      }
      const stored = await store.putBlob(tenantId, data).catch(() => null);
      if (!stored) continue;
      onStored(stored);
      read.set(filePath, { hash: stored.hash, size: stored.size });
    }
  };
  await Promise.all(Array.from({ length: Math.min(READS_IN_FLIGHT, paths.length) }, worker));
  return read;
}

/**
 * One `getArchive` of the workdir, keeping only the wanted files' entries (a first checkpoint, a big turn).
 * Small files are buffered and stored WRITES_IN_FLIGHT at a time while the archive goes on; big ones are
 * streamed into the store one after another.
 */
async function readThroughArchive(
  machine: WorkspaceMachine,
  store: CheckpointStore,
  tenantId: string,
  wanted: ReadonlySet<string>,
  onStored: (stored: { hash: string; size: number; stored: boolean }) => void,
): Promise<Map<string, { hash: string; size: number }>> {
  const read = new Map<string, { hash: string; size: number }>();
  const writing = new Set<Promise<void>>();
  const failure: { error: Error | null } = { error: null };
  const put = (relative: string, data: Readable): Promise<void> =>
    store.putBlob(tenantId, data).then((stored) => {
      onStored(stored);
      read.set(relative, { hash: stored.hash, size: stored.size });
    });
  const archive = await machine.getArchive(machine.workdir);
  const extract = tarStream.extract();
  const done = new Promise<void>((resolve, reject) => {
    extract.on("entry", (header, stream, next) => {
      // The archive's single top entry is the workdir's basename: strip it.
      const relative = header.name.split("/").slice(1).join("/").replace(/\/$/, "");
      if (header.type !== "file" || !wanted.has(relative)) {
        stream.on("end", next);
        stream.resume();
        return;
      }
      if ((header.size ?? 0) > BUFFERED_FILE_BYTES) {
        put(relative, Readable.from(stream as AsyncIterable<Buffer>)).then(
          () => next(),
          (error: unknown) => next(error as Error),
        );
        return;
      }
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: unknown) => chunks.push(chunk as Buffer));
      stream.on("end", () => {
        const job = put(relative, Readable.from([Buffer.concat(chunks)])).catch((error: unknown) => {
          failure.error ??= error as Error;
        });
        writing.add(job);
        void job.finally(() => writing.delete(job));
        if (writing.size < WRITES_IN_FLIGHT) next(failure.error);
        else void Promise.race(writing).then(() => next(failure.error));
      });
    });
    extract.on("finish", resolve);
    extract.on("error", reject);
    archive.on("error", reject);
  });
  archive.pipe(extract);
  await done;
  await Promise.all(writing);
  if (failure.error) throw failure.error;
  return read;
}
