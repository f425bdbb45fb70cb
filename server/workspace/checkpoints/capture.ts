import { Readable } from "node:stream";
import tarStream from "tar-stream";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import type { CheckpointStore } from "./checkpoint-store";
import { listMachineTree, type ListedEntry } from "./machine-listing";
import { byName, type CaptureIndex, indexOf, rememberIndex, sameEntries } from "./capture-index";
import { encodeTree, type FileEntry, type TreeEntry } from "./tree";

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

export async function captureCheckpoint(options: {
  machine: WorkspaceMachine;
  store: CheckpointStore;
  tenantId: string;
  /** Root tree of the workspace's previous checkpoint (null for the first). */
  previous: string | null;
  signal?: AbortSignal;
}): Promise<CaptureResult> {
  const { machine, store, tenantId, signal } = options;
  const [listing, previous] = await Promise.all([
    listMachineTree(machine, signal ? { signal } : {}),
    options.previous ? indexOf(store, tenantId, options.previous) : null,
  ]);
  const known = previous?.files ?? new Map<string, FileEntry>();
  const stats: CaptureResult["stats"] = {
    files: 0,
    directories: 0,
    totalBytes: 0,
    readFiles: 0,
    storedObjects: 0,
    storedBytes: 0,
    skippedFiles: 0,
  };
  const blobs = new Map<string, { hash: string; size: number }>();
  const toRead: string[] = [];
  for (const entry of listing) {
    if (entry.type !== "file") continue;
    const before = known.get(entry.path);
    if (before && before.size === entry.size && before.mtimeMs === entry.mtimeMs) {
      blobs.set(entry.path, { hash: before.hash, size: before.size });
    } else {
      toRead.push(entry.path);
    }
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
  for (const [filePath, blob] of read) blobs.set(filePath, blob);
  stats.readFiles = read.size;
  stats.skippedFiles = toRead.length - read.size;
  const index: CaptureIndex = { files: new Map(), folders: new Map() };
  const root = await storeTrees(store, tenantId, listing, blobs, stats, previous, index);
  rememberIndex(store, tenantId, root, index);
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
  for (const filePath of paths) {
    signal?.throwIfAborted();
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
  let failed: Error | null = null;
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
          failed ??= error as Error;
        });
        writing.add(job);
        void job.finally(() => writing.delete(job));
        if (writing.size < WRITES_IN_FLIGHT) next(failed);
        else void Promise.race(writing).then(() => next(failed));
      });
    });
    extract.on("finish", resolve);
    extract.on("error", reject);
    archive.on("error", reject);
  });
  archive.pipe(extract);
  await done;
  await Promise.all(writing);
  if (failed) throw failed;
  return read;
}

/**
 * Builds and stores the trees bottom-up from the listing; returns the root tree's hash and fills `index`.
 * A folder whose entries equal the previous checkpoint's keeps its tree (already in the store): a turn that
 * changed k files encodes and writes only the trees on their paths.
 */
async function storeTrees(
  store: CheckpointStore,
  tenantId: string,
  listing: readonly ListedEntry[],
  blobs: ReadonlyMap<string, { hash: string; size: number }>,
  stats: CaptureResult["stats"],
  previous: CaptureIndex | null,
  index: CaptureIndex,
): Promise<string> {
  const children = new Map<string, TreeEntry[]>([["", []]]);
  const dirModes = new Map<string, number>();
  for (const entry of listing) if (entry.type === "dir") children.set(entry.path, []);
  for (const entry of listing) {
    const slash = entry.path.lastIndexOf("/");
    const parent = slash === -1 ? "" : entry.path.slice(0, slash);
    const siblings = children.get(parent);
    if (!siblings) continue; // its folder was not listed (vanished mid-walk)
    const name = entry.path.slice(slash + 1);
    if (entry.type === "dir") {
      dirModes.set(entry.path, entry.mode);
      stats.directories += 1;
    } else if (entry.type === "symlink") {
      siblings.push({ name, type: "symlink", target: entry.target });
    } else {
      const blob = blobs.get(entry.path);
      if (!blob) continue;
      const file: FileEntry = {
        name,
        type: "file",
        mode: entry.mode,
        size: blob.size,
        mtimeMs: entry.mtimeMs,
        hash: blob.hash,
      };
      siblings.push(file);
      index.files.set(entry.path, file);
      stats.files += 1;
      stats.totalBytes += blob.size;
    }
  }
  const storeFolder = async (folder: string): Promise<string> => {
    const entries = (children.get(folder) ?? []).sort(byName);
    const before = previous?.folders.get(folder);
    if (before && sameEntries(before.entries, entries)) {
      index.folders.set(folder, { entries, hash: before.hash });
      return before.hash;
    }
    const { bytes, hash } = encodeTree(entries);
    if (await store.putTree(tenantId, hash, bytes)) {
      stats.storedObjects += 1;
      stats.storedBytes += bytes.length;
    }
    index.folders.set(folder, { entries, hash });
    return hash;
  };
  // Deepest folders first, so each folder's subtrees are hashed before it.
  const depth = (folder: string) => folder.split("/").length;
  const folders = [...dirModes.keys()].sort((a, b) => depth(b) - depth(a));
  for (const folder of folders) {
    const hash = await storeFolder(folder);
    const slash = folder.lastIndexOf("/");
    children
      .get(slash === -1 ? "" : folder.slice(0, slash))
      ?.push({ name: folder.slice(slash + 1), type: "dir", mode: dirModes.get(folder)!, hash });
  }
  return storeFolder("");
}
