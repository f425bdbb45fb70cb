import { createHash } from "node:crypto";
import { AppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { tooManyEntries, type ArchiveEntry } from "@/server/workspace/archive/archive-entries";
import { EntryTree, type ExtractedSymlink } from "@/server/workspace/archive/entry-validator";
import type { ExtractionSink } from "@/server/workspace/archive/sinks/extraction-sink";
import { createHostDirectorySink } from "@/server/workspace/archive/sinks/host-directory-sink";
import { createTarRepackSink } from "@/server/workspace/archive/sinks/tar-repack-sink";

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

/** `sha256` is null when the extraction was asked not to hash (see `extractToMachine`). */
type ExtractedFile = { path: string; size: number; sha256: string | null; executable: boolean };

/** What was extracted, in archive order: enough to find the skill root, check its links and hash it. */
export type ExtractionManifest = {
  /** Regular files; a hard link appears as a file with its target's content. */
  files: ExtractedFile[];
  directories: string[];
  symlinks: ExtractedSymlink[];
  expandedBytes: number;
  entries: number;
};

/**
 * Validates entries one by one and writes the accepted ones under `targetDir` on the backend: straight to
 * disk when the backend's files are this host's files, else re-packed as a clean tar into
 * `backend.putArchive`. On the first violation the sink is stopped and the error thrown; the caller deletes
 * `targetDir` (a staging directory), so nothing half-validated survives.
 */
export async function extractToMachine(
  source: AsyncIterable<ArchiveEntry>,
  machine: WorkspaceMachine,
  targetDir: string,
  limits: ArchiveLimits,
): Promise<ExtractionManifest> {
  const hostDir = machine.hostPath?.(targetDir);
  // Hashing every byte is as costly as the rest of a direct install, and its files are cheap to read back
  // when a hash is needed; a re-packed archive's files are not, so those are hashed on the way.
  if (hostDir) return extractToSink(source, await createHostDirectorySink(hostDir), limits, false);
  return extractToSink(source, createTarRepackSink(machine, targetDir), limits, true);
}

export async function extractToSink(
  source: AsyncIterable<ArchiveEntry>,
  sink: ExtractionSink,
  limits: ArchiveLimits,
  hashContent: boolean,
): Promise<ExtractionManifest> {
  const tree = new EntryTree();
  const manifest: ExtractionManifest = {
    files: [],
    directories: [],
    symlinks: [],
    expandedBytes: 0,
    entries: 0,
  };
  const fileByPath = new Map<string, ExtractedFile>();
  const budget = { limit: limits.maxExpandedBytes, used: 0 };
  try {
    for await (const entry of source) {
      manifest.entries += 1;
      if (manifest.entries > limits.maxEntries) throw tooManyEntries(limits.maxEntries, manifest.entries);
      const accepted = tree.accept(entry);
      if (!accepted) {
        entry.discard();
        continue;
      }
      for (const parent of accepted.parents) {
        await sink.directory(parent);
        manifest.directories.push(parent);
      }
      const { name, linkTarget } = accepted;
      if (entry.type === "directory") {
        await sink.directory(name);
        manifest.directories.push(name);
      } else if (entry.type === "symlink") {
        await sink.symlink(name, linkTarget!);
        manifest.symlinks.push({ path: name, target: linkTarget! });
      } else if (entry.type === "hardlink") {
        await sink.hardlink(name, linkTarget!);
        const file = { ...fileByPath.get(linkTarget!)!, path: name };
        manifest.files.push(file);
        fileByPath.set(name, file);
      } else {
        // A regular file: EntryTree refused every other kind.
        if (budget.used + entry.size > budget.limit) throw tooLarge(budget.limit, name);
        const file = await writeFile(sink, name, entry, budget, hashContent);
        manifest.files.push(file);
        fileByPath.set(name, file);
      }
    }
    manifest.expandedBytes = budget.used;
    await sink.finish();
    return manifest;
  } catch (error) {
    await sink.abort();
    throw error;
  }
}

async function writeFile(
  sink: ExtractionSink,
  name: string,
  entry: ArchiveEntry,
  budget: { limit: number; used: number },
  hashContent: boolean,
): Promise<ExtractedFile> {
  const body = entry.body;
  if (!body) throw new AppError("INTERNAL", `Archive file entry without a body: ${name}`);
  const executable = (entry.mode & 0o111) !== 0;
  const file = await sink.file(name, entry.size, executable);
  const hash = hashContent ? createHash("sha256") : null;
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    budget.used += chunk.length;
    // Counted on the bytes actually inflated, not on what the header claims (a lying zip bomb).
    if (budget.used > budget.limit) throw tooLarge(budget.limit, name);
    if (size > entry.size) throw sizeMismatch(name);
    hash?.update(chunk);
    const backpressure = file.write(chunk);
    if (backpressure) await backpressure;
  }
  if (size !== entry.size) throw sizeMismatch(name);
  await file.end();
  return { path: name, size, sha256: hash?.digest("hex") ?? null, executable };
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
