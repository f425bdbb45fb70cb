import { createHash } from "node:crypto";
import path from "node:path";
import type { Readable } from "node:stream";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import type { ExtractionManifest } from "@/server/workspace/archive/extract-to-machine";

/**
 * Identical skills are installed once (hash dedupe). Hashing every byte of every install costs as much as
 * the rest of a local install, so it is done only when it can matter: each index entry keeps the skill's
 * SHAPE (relative paths, sizes, executable bits, link targets), cheap to compute from the manifest, and
 * content is hashed only against entries of the same shape, reading the files back through the backend.
 * Archives re-packed for a sandbox are hashed on the way (their files are costly to read back).
 */
export type IndexEntry = { name: string; hash?: string | undefined; shape?: string | undefined };

type SkillFile = { rel: string; sha256: string | null; executable: boolean };

function filesUnder(manifest: ExtractionManifest, root: string): SkillFile[] {
  const prefix = root ? `${root}/` : "";
  return manifest.files
    .filter((file) => file.path.startsWith(prefix))
    .map((file) => ({
      rel: file.path.slice(prefix.length),
      sha256: file.sha256,
      executable: file.executable,
    }));
}

function linkLines(manifest: ExtractionManifest, root: string): string[] {
  const prefix = root ? `${root}/` : "";
  return manifest.symlinks
    .filter((link) => link.path.startsWith(prefix))
    .map((link) => `${link.path.slice(prefix.length)}\0->\0${link.target}\n`);
}

function digestLines(lines: string[]): string {
  const hash = createHash("sha256");
  for (const line of lines.sort()) hash.update(line);
  return hash.digest("hex");
}

/** SHA-256 over the skill folder's paths, sizes, executable bits and symlink targets. */
function shapeHash(manifest: ExtractionManifest, root: string): string {
  const prefix = root ? `${root}/` : "";
  const files = manifest.files
    .filter((file) => file.path.startsWith(prefix))
    .map((file) => `${file.path.slice(prefix.length)}\0${file.size}\0${file.executable ? 1 : 0}\n`);
  return digestLines([...files, ...linkLines(manifest, root)]);
}

/**
 * SHA-256 over the skill folder's files (relative path, content hash, executable bit) and symlinks
 * (relative path, target), order-independent. `shaOf` supplies content hashes the manifest lacks.
 */
function contentHashWith(manifest: ExtractionManifest, root: string, shaOf: (rel: string) => string): string {
  const files = filesUnder(manifest, root).map(
    (file) => `${file.rel}\0${file.sha256 ?? shaOf(file.rel)}\0${file.executable ? 1 : 0}\n`,
  );
  return digestLines([...files, ...linkLines(manifest, root)]);
}

/** The content hash when extraction computed every file's SHA-256, else null. */
function contentHashIfKnown(manifest: ExtractionManifest, root: string): string | null {
  if (filesUnder(manifest, root).some((file) => file.sha256 === null)) return null;
  return contentHashWith(manifest, root, () => "");
}

async function sha256Of(machine: WorkspaceMachine, file: string): Promise<string | null> {
  let stream: Readable;
  try {
    stream = await machine.readFile(file);
  } catch {
    return null;
  }
  const hash = createHash("sha256");
  for await (const chunk of stream as AsyncIterable<Buffer>) hash.update(chunk);
  return hash.digest("hex");
}

/**
 * The content hash of the files at `folder` (backend path), taking the file list, executable bits and
 * links from the manifest: valid for the new skill itself, and for an installed skill of the same shape.
 * Null when a file cannot be read (the installed skill changed since).
 */
async function contentHashAt(
  machine: WorkspaceMachine,
  folder: string,
  manifest: ExtractionManifest,
  root: string,
): Promise<string | null> {
  const shas = new Map<string, string>();
  for (const file of filesUnder(manifest, root)) {
    const sha = await sha256Of(machine, path.posix.join(folder, file.rel));
    if (sha === null) return null;
    shas.set(file.rel, sha);
  }
  return contentHashWith(manifest, root, (rel) => shas.get(rel)!);
}

/**
 * The folder of an indexed skill with the same content as the new one at `rootPath`, or null, plus the new
 * skill's content hash when it had to be computed (to store in the index).
 */
export async function findDuplicate(
  machine: WorkspaceMachine,
  partitionDir: string,
  entries: Record<string, IndexEntry>,
  candidate: { manifest: ExtractionManifest; root: string; rootPath: string },
): Promise<{ folder: string | null; shape: string; hash: string | undefined }> {
  const { manifest, root, rootPath } = candidate;
  const shape = shapeHash(manifest, root);
  let hash = contentHashIfKnown(manifest, root) ?? undefined;
  for (const [folder, entry] of Object.entries(entries)) {
    // Entries written before shapes were recorded have only a content hash: compare that.
    if (entry.shape !== undefined && entry.shape !== shape) continue;
    hash ??= (await contentHashAt(machine, rootPath, manifest, root)) ?? undefined;
    if (hash === undefined) break;
    const theirs =
      entry.hash ??
      (entry.shape === shape
        ? await contentHashAt(machine, path.posix.join(partitionDir, folder), manifest, root)
        : null);
    if (theirs === hash) return { folder, shape, hash };
  }
  return { folder: null, shape, hash };
}
