import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import tarStream from "tar-stream";
import { AppError, toAppError } from "@/server/shared/errors";
import type { WorkspaceBackend } from "@/server/workspace/backend/port";
import { tooManyEntries, type ArchiveEntry } from "@/server/workspace/archive/archive-entries";
import { EntryTree } from "@/server/workspace/archive/entry-validator";

export type ArchiveLimits = {
  /** Total bytes of file content after decompression, counted on the bytes actually produced. */
  maxExpandedBytes: number;
  /** Entries of any kind (directories included). */
  maxEntries: number;
  /** Bytes of the archive as uploaded (compressed). */
  maxArchiveBytes: number;
};

export const DEFAULT_ARCHIVE_LIMITS: ArchiveLimits = {
  maxExpandedBytes: 500 * 1024 * 1024,
  maxEntries: 10_000,
  maxArchiveBytes: 500 * 1024 * 1024,
};

export type ExtractedFile = { path: string; size: number; sha256: string; executable: boolean };

/** What was extracted, in archive order: enough to find the skill root and hash its content. */
export type ExtractionManifest = {
  files: ExtractedFile[];
  directories: string[];
  expandedBytes: number;
  entries: number;
};

// Fixed mtime so that extraction is reproducible and nothing in the archive can set odd timestamps.
const EXTRACTED_MTIME = new Date(0);
const RELAY_BATCH_BYTES = 256 * 1024;

/**
 * Validates entries one by one and streams the accepted ones, re-packed as a clean tar (files and
 * directories only, sanitised names and modes), into `backend.putArchive(targetDir)`. Works the same on
 * every backend because the backend only ever sees the clean tar. On the first violation the tar stream is
 * ended early so the backend stops, and the error is thrown; the caller deletes `targetDir` (a staging
 * directory), so nothing half-validated survives.
 */
export async function extractToBackend(
  source: AsyncIterable<ArchiveEntry>,
  backend: WorkspaceBackend,
  targetDir: string,
  limits: ArchiveLimits,
): Promise<ExtractionManifest> {
  const pack = tarStream.pack();
  const abort = new AbortController();
  const putting = backend.putArchive(targetDir, Readable.from(relay(pack), { objectMode: false }));
  const backendFailure = putting.then(
    () => null,
    (error: unknown) => {
      abort.abort(error);
      pack.destroy();
      return toAppError(error);
    },
  );
  // One promise for the whole extraction: racing every drain against it adds no listener per chunk.
  const abortedByBackend = new Promise<never>((_resolve, reject) => {
    abort.signal.addEventListener("abort", () => reject(toAppError(abort.signal.reason)), { once: true });
  });
  abortedByBackend.catch(() => undefined);
  const tree = new EntryTree();
  const manifest: ExtractionManifest = { files: [], directories: [], expandedBytes: 0, entries: 0 };
  const budget = { limit: limits.maxExpandedBytes, used: 0 };
  try {
    for await (const entry of source) {
      manifest.entries += 1;
      if (manifest.entries > limits.maxEntries) throw tooManyEntries(limits.maxEntries, manifest.entries);
      if (abort.signal.aborted) break;
      const accepted = tree.accept(entry);
      if (!accepted) {
        entry.discard();
        continue;
      }
      for (const parent of accepted.parents) addDirectory(pack, manifest, parent);
      if (entry.type === "directory") {
        addDirectory(pack, manifest, accepted.name);
        continue;
      }
      if (budget.used + entry.size > budget.limit) throw tooLarge(budget.limit, accepted.name);
      manifest.files.push(await addFile(pack, accepted.name, entry, budget, abortedByBackend));
    }
    manifest.expandedBytes = budget.used;
    pack.finalize();
    const failure = await backendFailure;
    if (failure) throw failure;
    return manifest;
  } catch (error) {
    // Ends the tar stream where it is: the backend's extractor sees EOF and exits, so the caller can
    // safely delete the staging directory once this settles.
    pack.destroy();
    await backendFailure;
    throw error;
  }
}

/** tar-stream's pack as a byte stream that ends (rather than errors) when the pack is destroyed. */
async function* relay(pack: tarStream.Pack): AsyncGenerator<Buffer> {
  // tar-stream emits many small chunks (headers, 16 KiB slices); batching them to ~256 KiB cuts the
  // number of writes into the backend's pipe, which dominates the cost of a large install.
  const batch: Buffer[] = [];
  let batched = 0;
  try {
    for await (const chunk of pack as AsyncIterable<Buffer>) {
      batch.push(chunk);
      batched += chunk.length;
      if (batched >= RELAY_BATCH_BYTES) {
        yield batch.length === 1 ? batch[0]! : Buffer.concat(batch, batched);
        batch.length = 0;
        batched = 0;
      }
    }
    if (batched > 0) yield batch.length === 1 ? batch[0]! : Buffer.concat(batch, batched);
  } catch {
    // Destroyed on purpose after a validation failure: end the stream so the consumer stops cleanly.
  }
}

function addDirectory(pack: tarStream.Pack, manifest: ExtractionManifest, name: string): void {
  pack.entry({ name: `${name}/`, type: "directory", mode: 0o755, mtime: EXTRACTED_MTIME });
  manifest.directories.push(name);
}

async function addFile(
  pack: tarStream.Pack,
  name: string,
  entry: ArchiveEntry,
  budget: { limit: number; used: number },
  abortedByBackend: Promise<never>,
): Promise<ExtractedFile> {
  const body = entry.body;
  if (!body) throw new AppError("INTERNAL", `Archive file entry without a body: ${name}`);
  const executable = (entry.mode & 0o111) !== 0;
  let sink!: ReturnType<tarStream.Pack["entry"]>;
  const written = new Promise<void>((resolve, reject) => {
    sink = pack.entry(
      { name, type: "file", size: entry.size, mode: executable ? 0o755 : 0o644, mtime: EXTRACTED_MTIME },
      (error) => (error ? reject(error) : resolve()),
    );
  });
  written.catch(() => undefined);
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    budget.used += chunk.length;
    // Counted on the bytes actually inflated, not on what the header claims (a lying zip bomb).
    if (budget.used > budget.limit) throw tooLarge(budget.limit, name);
    if (size > entry.size) throw sizeMismatch(name);
    hash.update(chunk);
    if (!sink.write(chunk)) await drained(sink, abortedByBackend);
  }
  if (size !== entry.size) throw sizeMismatch(name);
  // streamx types require an argument; undefined means "no final chunk".
  sink.end(undefined);
  await Promise.race([written, abortedByBackend]);
  return { path: name, size, sha256: hash.digest("hex"), executable };
}

function drained(sink: NodeJS.EventEmitter, abortedByBackend: Promise<never>): Promise<void> {
  return Promise.race([
    new Promise<void>((resolve) => sink.once("drain", () => resolve())),
    abortedByBackend,
  ]);
}

function tooLarge(limit: number, entry: string): AppError {
  return new AppError("PAYLOAD_TOO_LARGE", `The archive expands to more than ${limit} bytes`, {
    details: { limit, limitName: "maxExpandedBytes", entry },
  });
}

function sizeMismatch(entry: string): AppError {
  return new AppError(
    "BAD_REQUEST",
    `Archive entry ${JSON.stringify(entry)} does not match its declared size`,
    {
      details: { entry, reason: "size mismatch" },
    },
  );
}
