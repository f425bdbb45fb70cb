import { constants, linkSync, mkdirSync, symlinkSync } from "node:fs";
import fs, { type FileHandle } from "node:fs/promises";
import path from "node:path";
import { toAppError } from "@/server/shared/errors";
import type { ExtractionSink, FileSink } from "@/server/workspace/archive/sinks/extraction-sink";

// Positional writes may overlap (the next chunk is hashed while the last one is written), bounded so a
// slow disk cannot make memory grow.
const MAX_BYTES_IN_FLIGHT = 8 * 1024 * 1024;
// Files up to this size are buffered and written in the background, several at once: on a filesystem
// where every syscall is slow, awaiting each small file in turn makes a skill of many small files
// (the usual shape) several times slower than `tar -x`.
const SMALL_FILE_BYTES = 64 * 1024;
const SMALL_FILES_IN_FLIGHT = 8;
// Never follow a link at the final component and never reuse an existing file: the target is a fresh
// staging directory, so anything already there means something raced us.
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/**
 * Writes validated entries straight into a host directory: the fast path for a backend whose files are
 * this host's files. Entry names are already normalised relative paths with their parents created first,
 * so a plain join stays inside `root`.
 */
export async function createHostDirectorySink(root: string): Promise<ExtractionSink> {
  await fs.mkdir(root, { recursive: true });
  let open: HostFileSink | null = null;
  const background = new BackgroundWrites();
  const at = (name: string) => path.join(root, name);
  return {
    // Directories and links are created synchronously (each is one syscall), so every later entry finds
    // its parent in place even while earlier files are still being written.
    directory(name) {
      mkdirSync(at(name), { mode: 0o755 });
    },
    async file(name, size, executable) {
      const mode = executable ? 0o755 : 0o644;
      if (size <= SMALL_FILE_BYTES)
        return new SmallFileSink((data) => background.write(at(name), data, mode));
      open = new HostFileSink(await fs.open(at(name), CREATE_FLAGS, mode));
      return open;
    },
    symlink(name, target) {
      symlinkSync(target, at(name));
    },
    async hardlink(name, existing) {
      // The target may still be in flight.
      await background.settle();
      linkSync(at(existing), at(name));
    },
    async finish() {
      await background.settle();
    },
    async abort() {
      await Promise.allSettled([open?.close(), background.settle()]);
    },
  };
}

/** Small-file writes running on the thread pool, a few at a time; the first failure is kept and rethrown. */
class BackgroundWrites {
  private readonly running = new Set<Promise<void>>();
  private failure: Error | null = null;

  async write(file: string, data: Buffer, mode: number): Promise<void> {
    if (this.failure) throw this.failure;
    while (this.running.size >= SMALL_FILES_IN_FLIGHT) await Promise.race(this.running);
    const writing: Promise<void> = fs.writeFile(file, data, { flag: CREATE_FLAGS, mode }).then(
      () => undefined,
      (error: unknown) => {
        this.failure ??= toAppError(error);
      },
    );
    void writing.then(() => this.running.delete(writing));
    this.running.add(writing);
  }

  /** Waits for every write; throws the first failure. */
  async settle(): Promise<void> {
    await Promise.all(this.running);
    if (this.failure) throw this.failure;
  }
}

/** Collects a small file's bytes (at most SMALL_FILE_BYTES, checked by the extractor) for one write. */
class SmallFileSink implements FileSink {
  private readonly chunks: Buffer[] = [];

  constructor(private readonly flush: (data: Buffer) => Promise<void>) {}

  write(chunk: Buffer): undefined {
    this.chunks.push(chunk);
    return undefined;
  }

  end(): Promise<void> {
    return this.flush(this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks));
  }
}

class HostFileSink implements FileSink {
  private position = 0;
  private inFlight = 0;
  // Settled promises only: each write records its failure instead of rejecting.
  private readonly pending = new Set<Promise<void>>();
  private failure: Error | null = null;
  private closed: Promise<void> | null = null;

  constructor(private readonly handle: FileHandle) {}

  write(chunk: Buffer): Promise<void> | undefined {
    if (this.failure) return Promise.reject(this.failure);
    const position = this.position;
    this.position += chunk.length;
    this.inFlight += chunk.length;
    const writing: Promise<void> = this.writeAll(chunk, position).then(
      () => undefined,
      (error: unknown) => {
        this.failure ??= toAppError(error);
      },
    );
    void writing.then(() => {
      this.inFlight -= chunk.length;
      this.pending.delete(writing);
    });
    this.pending.add(writing);
    return this.inFlight > MAX_BYTES_IN_FLIGHT ? this.backpressure() : undefined;
  }

  async end(): Promise<void> {
    await Promise.all(this.pending);
    await this.close();
    if (this.failure) throw this.failure;
  }

  /** Closes once in-flight writes settle; safe to call twice (abort after a failed end). */
  close(): Promise<void> {
    this.closed ??= Promise.all(this.pending).then(() => this.handle.close());
    return this.closed;
  }

  private async backpressure(): Promise<void> {
    while (this.inFlight > MAX_BYTES_IN_FLIGHT / 2 && !this.failure) await Promise.race(this.pending);
    if (this.failure) throw this.failure;
  }

  /** A positional write may be short: loop until the whole chunk is down. */
  private async writeAll(chunk: Buffer, position: number): Promise<void> {
    let offset = 0;
    while (offset < chunk.length) {
      const { bytesWritten } = await this.handle.write(
        chunk,
        offset,
        chunk.length - offset,
        position + offset,
      );
      offset += bytesWritten;
    }
  }
}
