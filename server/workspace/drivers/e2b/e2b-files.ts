import { randomBytes } from "node:crypto";
import path from "node:path";
import { Readable, Transform, type TransformCallback } from "node:stream";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import { FileNotFoundError, FileType, InvalidArgumentError, type EntryInfo, type Sandbox } from "e2b";
import { AppError } from "@/server/shared/errors";
import type { DirEntry, FileStat, WriteFileOptions } from "@/server/workspace/drivers/port";
import {
  appendLockScript,
  SCRIPT_EXIT as EXIT,
  SCRIPTS as EXEC_SCRIPTS,
} from "@/server/workspace/drivers/exec-scripts/file-scripts";
import { runChore, type ChoreResult } from "./e2b-commands";
import { toAppError } from "./e2b-errors";

/**
 * The port's file operations through the SDK's files API (envd's /files and filesystem service), with
 * streams both ways. What that API lacks is built from it plus a small script: ranges (a slice copied to a
 * temporary file first when it starts far in), atomic replace (upload beside the target, then one rename),
 * exclusive create (upload, then a hard link that fails when the name exists), append (upload, then
 * `cat` into the target under its flock), realpath, and archives (tar to or from a temporary file, streamed through /files).
 *
 * envd acts as root and hands what it creates to the user; the scripts run as the user.
 */

/** Exit codes with a meaning in the scripts below: the exec drivers' (exec-scripts/file-scripts.ts). */
const SCRIPTS = {
  /** $1 file, $2 first byte, $3 count (or ""), $4 output. */
  slice: [
    `[ -e "$1" ] || exit ${EXIT.notFound}`,
    `[ -d "$1" ] && exit ${EXIT.wrongType}`,
    'if [ -n "$3" ]; then tail -c +"$(($2 + 1))" -- "$1" | head -c "$3" > "$4"',
    'else tail -c +"$(($2 + 1))" -- "$1" > "$4"; fi',
  ].join("\n"),
  /** $1 uploaded temp, $2 target, $3 octal mode (or ""). */
  /** Under the target's flock (see appendLockScript): contiguous at any size, across processes. */
  append: [
    `trap 'rm -f -- "$1"' EXIT; ${appendLockScript('"$2"')}`,
    'cat -- "$1" >&9; rc=$?; [ $rc -eq 0 ] && [ -n "$3" ] && chmod "$3" -- "$2"; exit $rc',
  ].join("\n"),
  exclusive: [
    '[ -z "$3" ] || chmod "$3" -- "$1"',
    `if ln -- "$1" "$2" 2>/dev/null; then rc=0; elif [ -e "$2" ] || [ -L "$2" ]; then rc=${EXIT.exists}; else ln -- "$1" "$2"; rc=$?; fi`,
    'rm -f -- "$1"; exit $rc',
  ].join("\n"),
  /** $1 temp, $2 target, $3 octal mode: replace with a mode, in one round trip. */
  replaceWithMode: 'chmod "$3" -- "$1" && exec mv -fT -- "$1" "$2"',
  realpath: EXEC_SCRIPTS.realpath,
  /** $1 directory (created), $2 uploaded tar (removed). */
  untar:
    'mkdir -p -- "$1" && tar -x -f "$2" -C "$1" --no-same-owner --same-permissions; rc=$?; rm -f -- "$2"; exit $rc',
  /** $1 path, $2 tar to write: a tar whose single top entry is the basename. */
  tar: [
    `[ -e "$1" ] || [ -L "$1" ] || exit ${EXIT.notFound}`,
    'cd -- "$(dirname -- "$1")" && exec tar -c -f "$2" -- "$(basename -- "$1")"',
  ].join("\n"),
} as const;

/** Ranges starting further in are cut out in the sandbox instead of skipped over the wire. */
const SKIP_OVER_WIRE_BYTES = 1024 * 1024;

export type FilesContext = { user: string; requestTimeoutMs: number; choreTimeoutMs: number };

export class E2bFiles {
  constructor(
    private readonly sandbox: Sandbox,
    private readonly context: FilesContext,
  ) {}

  async readFile(target: string, range: { start?: number; end?: number } = {}): Promise<Readable> {
    const start = range.start ?? 0;
    if (range.end !== undefined && range.end < start) return Readable.from([]);
    const count = range.end !== undefined ? range.end - start + 1 : undefined;
    if (start < SKIP_OVER_WIRE_BYTES) {
      const stream = await this.download(target);
      return start === 0 && count === undefined ? stream : stream.pipe(byteRange(start, count, stream));
    }
    const slice = this.tempPath("slice");
    this.check(
      await this.chore(SCRIPTS.slice, [
        target,
        String(start),
        count === undefined ? "" : String(count),
        slice,
      ]),
      target,
      "read",
    );
    const stream = await this.download(slice);
    stream.once("close", () => void this.removeQuietly(slice));
    return stream;
  }

  async writeFile(target: string, data: Readable | Uint8Array | string, options: WriteFileOptions = {}) {
    if (options.append && options.exclusive)
      throw new AppError("BAD_REQUEST", "append and exclusive cannot be combined");
    const mode = options.mode !== undefined ? (options.mode & 0o7777).toString(8) : "";
    // Beside the target (same filesystem, so the rename or link is atomic); a dot name, out of listings' way.
    const temp = path.posix.join(
      path.posix.dirname(target),
      `.${path.posix.basename(target)}.berth-${randomBytes(6).toString("hex")}`,
    );
    await this.upload(temp, data);
    try {
      if (options.append)
        this.check(await this.chore(SCRIPTS.append, [temp, target, mode]), target, "append");
      else if (options.exclusive)
        this.check(await this.chore(SCRIPTS.exclusive, [temp, target, mode]), target, "create");
      else if (mode)
        this.check(await this.chore(SCRIPTS.replaceWithMode, [temp, target, mode]), target, "write");
      else
        await this.sandbox.files.rename(temp, target, {
          user: this.context.user,
          requestTimeoutMs: this.context.requestTimeoutMs,
        });
    } catch (error) {
      await this.removeQuietly(temp);
      throw this.fileError(error, target, "write");
    }
  }

  async stat(target: string): Promise<FileStat | null> {
    let entry: EntryInfo;
    try {
      entry = await this.sandbox.files.getInfo(target, this.opts());
    } catch (error) {
      if (error instanceof FileNotFoundError || /not a directory/i.test(String(error))) return null;
      throw this.fileError(error, target, "stat");
    }
    return {
      type: typeOf(entry),
      size: entry.size,
      mtimeMs: entry.modifiedTime?.getTime() ?? 0,
      mode: entry.mode,
    };
  }

  async list(target: string): Promise<DirEntry[]> {
    try {
      const entries = await this.sandbox.files.list(target, { ...this.opts(), depth: 1 });
      return entries.map((entry) => {
        const type = typeOf(entry);
        return {
          name: entry.name,
          type,
          size: type === "directory" ? null : entry.size,
          mtimeMs: entry.modifiedTime?.getTime() ?? null,
        };
      });
    } catch (error) {
      throw this.fileError(error, target, "list");
    }
  }

  async mkdir(target: string): Promise<void> {
    try {
      await this.sandbox.files.makeDir(target, this.opts());
    } catch (error) {
      if (error instanceof InvalidArgumentError)
        throw new AppError("CONFLICT", `Already exists: ${target}`, { cause: error });
      throw this.fileError(error, target, "mkdir");
    }
  }

  async remove(target: string): Promise<void> {
    try {
      await this.sandbox.files.remove(target, this.opts());
    } catch (error) {
      throw this.fileError(error, target, "remove");
    }
  }

  async move(from: string, to: string): Promise<void> {
    try {
      await this.sandbox.files.rename(from, to, this.opts());
    } catch (error) {
      throw this.fileError(error, from, "move");
    }
  }

  async realpath(target: string): Promise<string | null> {
    const result = await this.chore(SCRIPTS.realpath, [target]);
    return result.exitCode === 0 ? result.stdout.replace(/\n$/, "") : null;
  }

  async putArchive(dir: string, archive: Readable): Promise<void> {
    const temp = this.tempPath("tar");
    await this.upload(temp, archive);
    this.check(await this.chore(SCRIPTS.untar, [dir, temp]), dir, "extract");
  }

  async getArchive(target: string): Promise<Readable> {
    const temp = this.tempPath("tar");
    const result = await this.chore(SCRIPTS.tar, [target, temp]);
    if (result.exitCode !== 0) {
      await this.removeQuietly(temp);
      this.check(result, target, "archive");
    }
    const stream = await this.download(temp);
    stream.once("close", () => void this.removeQuietly(temp));
    return stream;
  }

  /** A file's bytes as a Node stream: never buffered whole, cancelled when the consumer stops early. */
  private async download(target: string): Promise<Readable> {
    try {
      const web = await this.sandbox.files.read(target, {
        ...this.opts(),
        format: "stream",
        streamIdleTimeoutMs: this.context.requestTimeoutMs,
      });
      return Readable.fromWeb(web as unknown as NodeReadableStream<Uint8Array>, {
        highWaterMark: 1024 * 1024,
      });
    } catch (error) {
      throw this.fileError(error, target, "read");
    }
  }

  /** Uploads as a stream (octet-stream body: nothing is held whole on the host). */
  private async upload(target: string, data: Readable | Uint8Array | string): Promise<void> {
    const body = toNodeReadable(data);
    try {
      await this.sandbox.files.write(target, Readable.toWeb(body) as unknown as ReadableStream<Uint8Array>, {
        user: this.context.user,
      });
    } catch (error) {
      body.destroy();
      throw this.fileError(error, target, "write");
    }
  }

  private tempPath(kind: string): string {
    return `/tmp/.berth-${kind}-${randomBytes(8).toString("hex")}`;
  }

  private async removeQuietly(target: string): Promise<void> {
    await this.sandbox.files.remove(target, this.opts()).catch(() => undefined);
  }

  private opts() {
    return { user: this.context.user, requestTimeoutMs: this.context.requestTimeoutMs };
  }

  private chore(script: string, args: string[]): Promise<ChoreResult> {
    return runChore(this.sandbox, script, args, {
      user: this.context.user,
      timeoutMs: this.context.choreTimeoutMs,
      requestTimeoutMs: this.context.requestTimeoutMs,
    });
  }

  private check(result: ChoreResult, target: string, action: string): void {
    if (result.exitCode === 0) return;
    const details = { path: target, exitCode: result.exitCode, stderr: result.stderr.slice(0, 500) };
    const stderr = result.stderr;
    if (result.exitCode === EXIT.notFound || /No such file or directory/i.test(stderr)) {
      throw new AppError("NOT_FOUND", `No such file or directory: ${target}`, { details });
    }
    if (result.exitCode === EXIT.exists || /File exists/i.test(stderr)) {
      throw new AppError("CONFLICT", `Already exists: ${target}`, { details });
    }
    if (result.exitCode === EXIT.wrongType || /Is a directory|Not a directory/i.test(stderr)) {
      throw new AppError("BAD_REQUEST", `Wrong file type for ${action}: ${target}`, { details });
    }
    if (/Permission denied|Operation not permitted|Read-only file system/i.test(stderr)) {
      throw new AppError("FORBIDDEN", `Permission denied: ${target}`, { details });
    }
    throw new AppError(
      "INTERNAL",
      `${action} failed on ${target} (exit ${result.exitCode}): ${stderr.trim()}`,
      { details },
    );
  }

  private fileError(error: unknown, target: string, action: string): AppError {
    if (error instanceof AppError) return error;
    if (error instanceof FileNotFoundError) {
      return new AppError("NOT_FOUND", `No such file or directory: ${target}`, {
        cause: error,
        details: { path: target },
      });
    }
    if (error instanceof InvalidArgumentError) {
      return new AppError("BAD_REQUEST", `Wrong file type for ${action}: ${target}`, {
        cause: error,
        details: { path: target },
      });
    }
    const text = String(error);
    if (/is a directory|not a directory|file exists|directory not empty/i.test(text)) {
      return new AppError("BAD_REQUEST", `${action} refused for ${target}: ${text}`, {
        cause: error,
        details: { path: target },
      });
    }
    return toAppError(error, `${action} ${target}`, { sandboxId: this.sandbox.sandboxId });
  }
}

/**
 * Bytes, or any stream: archive producers hand over streams that are async iterables but not Node
 * Readables (tar-stream's pack is a streamx stream), and `Readable.toWeb` needs a Node one.
 */
function toNodeReadable(data: Readable | Uint8Array | string): Readable {
  if (typeof data === "string" || data instanceof Uint8Array) return Readable.from([Buffer.from(data)]);
  if (data instanceof Readable) return data;
  return Readable.from(data as AsyncIterable<Buffer>, { objectMode: false });
}

function typeOf(entry: EntryInfo): FileStat["type"] {
  if (entry.symlinkTarget !== undefined) return "symlink";
  if (entry.type === FileType.FILE) return "file";
  if (entry.type === FileType.DIR) return "directory";
  return "other";
}

/** Skips `start` bytes and passes `count` (all when undefined), then ends and cancels the download. */
function byteRange(start: number, count: number | undefined, source: Readable): Transform {
  let skipped = 0;
  let passed = 0;
  const out = new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      let piece = chunk;
      if (skipped < start) {
        const skip = Math.min(start - skipped, piece.length);
        skipped += skip;
        piece = piece.subarray(skip);
      }
      if (count !== undefined) piece = piece.subarray(0, Math.max(0, count - passed));
      passed += piece.length;
      if (piece.length > 0) this.push(piece);
      if (count !== undefined && passed >= count) {
        this.push(null);
        source.unpipe(out);
        source.destroy();
      }
      callback();
    },
  });
  out.on("close", () => {
    if (!source.destroyed) source.destroy();
  });
  return out;
}
