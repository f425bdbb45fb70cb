import { once } from "node:events";
import type { Readable } from "node:stream";
import tarStream from "tar-stream";
import { AppError } from "@/server/shared/errors";
import { tarBytes } from "@/server/workspace/archive/sinks/tar-repack-sink";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import type { CheckpointStore } from "./checkpoint-store";
import { listMachineTree, type ListedEntry } from "./machine-listing";
import { type FileEntry, type FlatEntry, walkTree } from "./tree";

/**
 * Brings the machine's workdir to a checkpoint's tree: what is there and should not be is deleted, what
 * differs (type, size, mtime, permission bits, link target) is written from the store as ONE tar stream
 * through the machine's own `putArchive`; everything that already matches is left alone. Restoring is
 * convergent: run again after a crash, it finishes the job (the caller keeps the workspace out of use
 * until it has), and on an already restored workdir it writes nothing.
 */
export type RestoreResult = { written: number; deleted: number; writtenBytes: number };

/** How far a restore is: the files and links streamed into the machine so far, of how many. */
export type RestoreProgress = {
  written: number;
  toWrite: number;
  writtenBytes: number;
  toWriteBytes: number;
};

const RM_BATCH = 500;
/** Blobs read ahead of the tar stream, and the size up to which one is read whole. */
const PREFETCH_FILES = 32;
const PREFETCH_MAX_BYTES = 256 * 1024;

export async function restoreCheckpoint(options: {
  machine: WorkspaceMachine;
  store: CheckpointStore;
  tenantId: string;
  root: string;
  signal?: AbortSignal;
  /** Called after each file or link is streamed (the caller throttles what it does with it). */
  onProgress?: (progress: RestoreProgress) => void;
}): Promise<RestoreResult> {
  const { machine, store, tenantId, root, signal, onProgress } = options;
  const target: FlatEntry[] = [];
  for await (const entry of walkTree((hash) => store.readTree(tenantId, hash), root)) target.push(entry);
  const wanted = new Map(target.map((entry) => [entry.path, entry]));
  const current = await listMachineTree(machine, signal ? { signal } : {});
  const present = new Map(current.map((entry) => [entry.path, entry]));

  // Deleted: what the checkpoint does not have, or has as another kind (a file where a folder was), and
  // links whose target differs (rewritten below). Under a deleted folder, nothing more needs deleting.
  // The listing is in pre-order, so a deleted folder's contents follow it directly.
  const toDelete: string[] = [];
  let deletedFolder: string | null = null;
  for (const entry of current) {
    if (deletedFolder !== null && entry.path.startsWith(`${deletedFolder}/`)) continue;
    const want = wanted.get(entry.path);
    if (!want || want.type !== entry.type || (want.type === "symlink" && !sameLink(entry, want.target))) {
      toDelete.push(entry.path);
      deletedFolder = entry.type === "dir" ? entry.path : deletedFolder;
    }
  }
  const deleted = new Set(toDelete);
  const isGone = (p: string) => {
    for (let at = p.length; at > 0; at = p.lastIndexOf("/", at - 1))
      if (deleted.has(p.slice(0, at))) return true;
    return false;
  };

  const toWrite = target.filter((entry) => {
    const have = isGone(entry.path) ? undefined : present.get(entry.path);
    if (!have) return true;
    if (entry.type === "file" && have.type === "file")
      return have.size !== entry.size || have.mtimeMs !== entry.mtimeMs || have.mode !== entry.mode;
    if (entry.type === "dir" && have.type === "dir") return have.mode !== entry.mode;
    return false;
  });

  for (let index = 0; index < toDelete.length; index += RM_BATCH) {
    signal?.throwIfAborted();
    const batch = toDelete.slice(index, index + RM_BATCH);
    const result = await machine.exec(["rm", "-rf", "--", ...batch], {
      cwd: machine.workdir,
      maxBufferBytes: 4096,
    });
    if (result.exitCode !== 0)
      throw new AppError(
        "UNAVAILABLE",
        `Deleting files for a restore failed: ${result.stderr.toString().slice(0, 300)}`,
      );
  }

  let writtenBytes = 0;
  const progress: RestoreProgress = {
    written: 0,
    toWrite: toWrite.filter((entry) => entry.type !== "dir").length,
    writtenBytes: 0,
    toWriteBytes: toWrite.reduce((sum, entry) => sum + (entry.type === "file" ? entry.size : 0), 0),
  };
  onProgress?.({ ...progress });
  if (toWrite.length > 0) {
    const pack = tarStream.pack();
    const blobs = prefetchBlobs(store, tenantId, toWrite);
    const producing = (async () => {
      for (const [at, entry] of toWrite.entries()) {
        signal?.throwIfAborted();
        if (entry.type === "dir") {
          await addEntry(pack, { name: entry.path, type: "directory", mode: entry.mode });
        } else if (entry.type === "symlink") {
          await addEntry(pack, { name: entry.path, type: "symlink", linkname: entry.target });
          progress.written += 1;
          onProgress?.({ ...progress });
        } else {
          const header = {
            name: entry.path,
            type: "file" as const,
            mode: entry.mode,
            size: entry.size,
            mtime: new Date(entry.mtimeMs),
            // ustar keeps whole seconds; the pax record keeps the microseconds the next walk compares.
            pax: { mtime: paxTime(entry.mtimeMs) },
          };
          const data = await blobs.take(at);
          if (Buffer.isBuffer(data)) {
            await addEntry(pack, header, data);
          } else {
            let sink!: ReturnType<tarStream.Pack["entry"]>;
            const written = new Promise<void>((resolve, reject) => {
              sink = pack.entry(header, (error) => (error ? reject(error) : resolve()));
            });
            for await (const chunk of data as AsyncIterable<Buffer>)
              if (!sink.write(chunk)) await once(sink, "drain");
            sink.end(undefined);
            await written;
          }
          writtenBytes += entry.size;
          progress.written += 1;
          progress.writtenBytes = writtenBytes;
          onProgress?.({ ...progress });
        }
      }
      pack.finalize();
    })();
    producing.catch((error: unknown) => {
      blobs.cancel();
      pack.destroy(error as Error);
    });
    await Promise.all([machine.putArchive(machine.workdir, tarBytes(pack)), producing]);
  }
  return {
    written: toWrite.filter((entry) => entry.type !== "dir").length,
    deleted: toDelete.length,
    writtenBytes,
  };
}

/** Milliseconds (with microseconds) as pax's decimal seconds, built from integers (no float rounding). */
function paxTime(mtimeMs: number): string {
  const seconds = Math.floor(mtimeMs / 1000);
  const micros = Math.round((mtimeMs - seconds * 1000) * 1000);
  return `${seconds}.${String(micros).padStart(6, "0")}`;
}

function sameLink(entry: ListedEntry, target: string): boolean {
  return entry.type === "symlink" && entry.target === target;
}

function addEntry(
  pack: tarStream.Pack,
  header: Parameters<tarStream.Pack["entry"]>[0],
  data?: Buffer,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (error?: Error | null) => (error ? reject(error) : resolve());
    if (data) pack.entry(header, data, done);
    else pack.entry(header, done);
  });
}

/**
 * Reads the blobs of the files to write ahead of the tar stream, PREFETCH_FILES at a time: small ones whole
 * (the store's reads overlap instead of one open, read and close after another), big ones as streams
 * opened when their turn comes.
 */
function prefetchBlobs(store: CheckpointStore, tenantId: string, toWrite: readonly FlatEntry[]) {
  const started = new Map<number, Promise<Buffer | Readable>>();
  let next = 0;
  let cancelled = false;
  const start = () => {
    while (!cancelled && next < toWrite.length && started.size < PREFETCH_FILES) {
      const at = next++;
      const entry = toWrite[at]!;
      if (entry.type !== "file") continue;
      const data =
        entry.size > PREFETCH_MAX_BYTES
          ? store.readBlob(tenantId, entry.hash)
          : store.readBlobBytes
            ? store.readBlobBytes(tenantId, entry.hash)
            : store.readBlob(tenantId, entry.hash).then((stream) => bytesOf(stream, entry.size));
      data.catch(() => undefined); // surfaced by take()
      started.set(at, data);
    }
  };
  return {
    async take(at: number): Promise<Buffer | Readable> {
      start();
      const data = started.get(at) ?? store.readBlob(tenantId, (toWrite[at] as FileEntry).hash);
      started.delete(at);
      start();
      return data;
    },
    cancel() {
      cancelled = true;
    },
  };
}

async function bytesOf(stream: Readable, size: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}
