import { createReadStream, createWriteStream } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Transform, type Readable, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import tarStream from "tar-stream";
import yauzl from "yauzl";
import { AppError, isAppError } from "@/server/shared/errors";

/** The archive formats a skill can be uploaded as. */
export type ArchiveFormat = "zip" | "tar" | "tar.gz";

/** Entry kinds as the archive declares them; only files, directories and contained links are accepted. */
type ArchiveEntryType = "file" | "directory" | "symlink" | "hardlink" | "device" | "fifo" | "other";

/**
 * One entry read from an archive (or a host directory). `body` must be consumed (or destroyed) before the
 * next entry is requested: sources are sequential streams, never buffered.
 */
export type ArchiveEntry = {
  name: string;
  type: ArchiveEntryType;
  /** Declared size in bytes (files); the extractor counts actual bytes anyway. */
  size: number;
  mode: number;
  /** The file's bytes (files only). */
  body: AsyncIterable<Buffer> | null;
  /**
   * Symlinks: the link's target as stored. Hard links: the archive path of the entry it links to.
   * Null for every other kind.
   */
  linkTarget: string | null;
  /** Skips the body without reading it (directories, or entries the consumer drops). */
  discard: () => void;
};

const noop = () => undefined;

/** Counts bytes flowing through and fails once more than `limit` have passed. */
function byteLimit(limit: number, error: () => AppError): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      seen += chunk.length;
      if (seen > limit) callback(error());
      else callback(null, chunk);
    },
  });
}

function archiveTooLarge(limit: number): AppError {
  return new AppError("PAYLOAD_TOO_LARGE", `The archive is larger than ${limit} bytes`, {
    details: { limit, limitName: "maxArchiveBytes" },
  });
}

/**
 * Entries of a tar or tar.gz stream, read with tar-stream (gunzip streamed through zlib). The input is
 * capped at `maxArchiveBytes` as it flows.
 */
export async function* tarEntries(
  input: Readable,
  gzipped: boolean,
  maxArchiveBytes: number,
): AsyncGenerator<ArchiveEntry> {
  const extract = tarStream.extract();
  const limited = byteLimit(maxArchiveBytes, () => archiveTooLarge(maxArchiveBytes));
  // tar-stream's streams are streamx, so plain pipe() with errors forwarded to the extractor (whose
  // iterator then throws) rather than stream.pipeline.
  const fail = (error: Error) => extract.destroy(error);
  input.on("error", fail);
  limited.on("error", fail);
  let chain: Readable = input.pipe(limited);
  if (gzipped) {
    const gunzip = createGunzip();
    gunzip.on("error", fail);
    chain = chain.pipe(gunzip);
  }
  chain.pipe(extract);
  try {
    for await (const entry of extract) {
      const header = entry.header;
      const type = tarType(header.type);
      if (type === null) {
        // pax/gnu metadata that tar-stream did not fold into the next header: not content.
        entry.resume();
        continue;
      }
      yield {
        name: header.name,
        type,
        size: header.size ?? 0,
        mode: header.mode ?? 0o644,
        body: type === "file" ? (entry as AsyncIterable<Buffer>) : null,
        linkTarget: type === "symlink" || type === "hardlink" ? (header.linkname ?? "") : null,
        discard: () => entry.resume(),
      };
      if (type !== "file") entry.resume();
    }
  } catch (error) {
    throw corruptOr(error, "tar");
  } finally {
    input.destroy();
    extract.destroy();
  }
}

function tarType(type: string | null | undefined): ArchiveEntryType | null {
  switch (type) {
    case "file":
    case "contiguous-file":
    case undefined:
    case null:
      return "file";
    case "directory":
      return "directory";
    case "symlink":
      return "symlink";
    case "link":
      return "hardlink";
    case "character-device":
    case "block-device":
      return "device";
    case "fifo":
      return "fifo";
    case "pax-header":
    case "pax-global-header":
    case "gnu-long-link-path":
    case "gnu-long-path":
      return null;
    default:
      return "other";
  }
}

/**
 * Entries of a zip stream. A zip's directory sits at its end, so the stream is spooled to a temp file on
 * the host (never to memory) and read with yauzl's lazy entries; the temp file is deleted afterwards.
 */
export async function* zipEntries(
  input: Readable,
  limits: { maxArchiveBytes: number; maxEntries: number },
  tempDir: string = os.tmpdir(),
): AsyncGenerator<ArchiveEntry> {
  const spoolDir = await fs.mkdtemp(path.join(tempDir, "berth-skill-zip-"));
  const spool = path.join(spoolDir, "upload.zip");
  let zip: yauzl.ZipFile | null = null;
  try {
    await pipeline(
      input,
      byteLimit(limits.maxArchiveBytes, () => archiveTooLarge(limits.maxArchiveBytes)),
      createWriteStream(spool),
    );
    zip = await openZip(spool);
    if (zip.entryCount > limits.maxEntries) {
      // The central directory tells us up front: no need to walk 100,000 entries to refuse them.
      throw tooManyEntries(limits.maxEntries, zip.entryCount);
    }
    for (;;) {
      const entry = await nextZipEntry(zip);
      if (!entry) break;
      const unixMode = (entry.externalFileAttributes >>> 16) & 0o177777;
      const type = zipType(entry.fileName, unixMode);
      const body = type === "file" ? await zip.openReadStreamPromise(entry) : null;
      // A zip stores a symlink's target as the entry's content.
      const linkTarget = type === "symlink" ? await readZipLinkTarget(zip, entry) : null;
      yield {
        name: entry.fileName,
        type,
        size: entry.uncompressedSize,
        mode: unixMode & 0o7777 || 0o644,
        body: body as AsyncIterable<Buffer> | null,
        linkTarget,
        discard: () => body?.destroy(),
      };
    }
  } catch (error) {
    throw corruptOr(error, "zip");
  } finally {
    zip?.close();
    await fs.rm(spoolDir, { recursive: true, force: true });
  }
}

const MAX_LINK_TARGET_BYTES = 4096;

async function readZipLinkTarget(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<string> {
  if (entry.uncompressedSize > MAX_LINK_TARGET_BYTES) {
    throw new AppError(
      "BAD_REQUEST",
      `Symbolic link ${JSON.stringify(entry.fileName)} has an over-long target`,
      {
        details: { entry: entry.fileName, reason: "link target too long" },
      },
    );
  }
  const chunks: Buffer[] = [];
  for await (const chunk of await zip.openReadStreamPromise(entry)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function zipType(fileName: string, unixMode: number): ArchiveEntryType {
  const kind = unixMode & 0o170000;
  if (kind === 0o120000) return "symlink";
  if (kind === 0o020000 || kind === 0o060000) return "device";
  if (kind === 0o010000) return "fifo";
  if (kind === 0o140000) return "other";
  if (fileName.endsWith("/") || kind === 0o040000) return "directory";
  return "file";
}

function openZip(file: string): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) => {
    // validateEntrySizes makes yauzl fail an entry whose inflated size differs from its header (a lying bomb).
    yauzl.open(file, { lazyEntries: true, autoClose: false, validateEntrySizes: true }, (error, zip) =>
      error ? reject(error) : resolve(zip),
    );
  });
}

function nextZipEntry(zip: yauzl.ZipFile): Promise<yauzl.Entry | null> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      zip.off("entry", onEntry);
      zip.off("end", onEnd);
      zip.off("error", onError);
    };
    const onEntry = (entry: yauzl.Entry) => {
      cleanup();
      resolve(entry);
    };
    const onEnd = () => {
      cleanup();
      resolve(null);
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    zip.on("entry", onEntry);
    zip.on("end", onEnd);
    zip.on("error", onError);
    zip.readEntry();
  });
}

/**
 * Entries of a host directory, named `<basename>/<relative path>` so the directory itself becomes the
 * skill folder. Symlinks and special files are reported as such (and then rejected by the validator).
 */
export async function* directoryEntries(hostDir: string): AsyncGenerator<ArchiveEntry> {
  const root = path.resolve(hostDir);
  const base = path.basename(root);
  async function* walk(dir: string, prefix: string): AsyncGenerator<ArchiveEntry> {
    const names = (await fs.readdir(dir)).sort();
    for (const name of names) {
      const full = path.join(dir, name);
      const relative = `${prefix}/${name}`;
      const stat = await fs.lstat(full);
      if (stat.isDirectory()) {
        yield {
          name: `${relative}/`,
          type: "directory",
          size: 0,
          mode: stat.mode & 0o7777,
          body: null,
          linkTarget: null,
          discard: noop,
        };
        yield* walk(full, relative);
      } else if (stat.isFile()) {
        // Opened on first read, so an entry refused before its body is read never holds a descriptor.
        const body = lazyFile(full);
        yield {
          name: relative,
          type: "file",
          size: stat.size,
          mode: stat.mode & 0o7777,
          body,
          linkTarget: null,
          discard: () => void body.return(undefined),
        };
      } else {
        const type: ArchiveEntryType = stat.isSymbolicLink() ? "symlink" : stat.isFIFO() ? "fifo" : "device";
        const linkTarget = type === "symlink" ? await fs.readlink(full) : null;
        yield {
          name: relative,
          type,
          size: 0,
          mode: stat.mode & 0o7777,
          body: null,
          linkTarget,
          discard: noop,
        };
      }
    }
  }
  yield {
    name: `${base}/`,
    type: "directory",
    size: 0,
    mode: 0o755,
    body: null,
    linkTarget: null,
    discard: noop,
  };
  yield* walk(root, base);
}

async function* lazyFile(file: string): AsyncGenerator<Buffer> {
  for await (const chunk of createReadStream(file)) yield chunk as Buffer;
}

export function tooManyEntries(limit: number, seen: number): AppError {
  return new AppError("PAYLOAD_TOO_LARGE", `The archive has more than ${limit} entries`, {
    details: { limit, seen, limitName: "maxEntries" },
  });
}

/** AppErrors pass through; yauzl's path checks become BAD_REQUEST; anything else means a corrupt archive. */
function corruptOr(error: unknown, format: string): AppError {
  if (isAppError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  const unsafePath = /^(invalid relative path|absolute path|invalid characters in fileName): (.*)$/s.exec(
    message,
  );
  if (unsafePath) {
    return new AppError("BAD_REQUEST", `Unsafe archive entry: ${message}`, {
      cause: error,
      details: { entry: unsafePath[2], reason: unsafePath[1] },
    });
  }
  return new AppError("BAD_REQUEST", `The ${format} archive is corrupt: ${message}`, {
    cause: error,
    details: { format },
  });
}
