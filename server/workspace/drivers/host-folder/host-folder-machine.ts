import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import type { Stats } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { PassThrough, Readable, type Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { AppError, isAppError } from "@/server/shared/errors";
import { deleteHostTree } from "@/server/workspace/drivers/host-folder/host-tree-deleter";
import type {
  DirEntry,
  ExecOptions,
  ExecResult,
  FileStat,
  WorkspaceMachine,
  WriteFileOptions,
} from "@/server/workspace/drivers/port";
import { workspaceVanished } from "@/server/workspace/drivers/vanished";
import { execOnHost } from "@/server/workspace/drivers/host-folder/host-exec";
import { appendUnderLock } from "@/server/workspace/drivers/host-folder/locked-append";

const APPEND_NO_FOLLOW =
  fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW;
/** A PATH good enough for coreutils, findutils, grep, tar and user-installed tools. */
export const DEFAULT_LOCAL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export type HostFolderMachineOptions = {
  /** Absolute host path of the workspace root. Should already be a realpath (the provider makes sure). */
  workdir: string;
  /**
   * The environment every command starts from. Berth's own environment (database URLs, API keys) is
   * deliberately NOT inherited: pass what agents may see. Default: `{ PATH: DEFAULT_LOCAL_PATH, HOME: workdir }`.
   */
  env?: Record<string, string>;
};

/**
 * The workspace backend on the host machine.
 *
 * TRUSTED ONLY: `isolated` is false. Commands run as Berth's own OS user, with its privileges, and cannot
 * be confined to the workdir (Bash can read or delete anything Berth can). The file tools are confined by
 * `server/workspace/paths.ts`, but that does not make the backend a sandbox. Use Docker/E2B/Kubernetes for
 * untrusted agents.
 */
export class HostFolderMachine implements WorkspaceMachine {
  readonly workdir: string;
  private readonly env: Record<string, string>;

  constructor(options: HostFolderMachineOptions) {
    if (!path.isAbsolute(options.workdir)) {
      throw new AppError("BAD_REQUEST", `Local workdir must be absolute: ${options.workdir}`);
    }
    this.workdir = path.resolve(options.workdir);
    this.env = options.env ?? { PATH: DEFAULT_LOCAL_PATH, HOME: this.workdir };
  }

  /** Relative paths resolve against the workdir. No confinement here: that is the tools' job. */
  private resolve(p: string): string {
    if (p.includes("\0")) throw new AppError("BAD_REQUEST", "Path contains a NUL byte");
    return path.resolve(this.workdir, p);
  }

  async exec(command: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    const result = await execOnHost(command, {
      ...options,
      cwd: this.resolve(options.cwd ?? this.workdir),
      env: { ...this.env, ...options.env },
    });
    // A command that could not start because the workdir is gone (spawn ... ENOENT): say what happened.
    if (result.exitCode === 127 && !(await isDirectory(this.workdir))) throw workspaceVanished(this);
    return result;
  }

  async readFile(p: string, options: { start?: number; end?: number } = {}): Promise<Readable> {
    const target = this.resolve(p);
    const handle = await fs.open(target, "r").catch((error: unknown) => {
      throw fsError(error, target);
    });
    const info = await handle.stat();
    if (info.isDirectory()) {
      await handle.close();
      throw new AppError("BAD_REQUEST", `Path is a directory: ${p}`, { details: { path: p } });
    }
    return handle.createReadStream({ start: options.start, end: options.end, autoClose: true });
  }

  async writeFile(
    p: string,
    data: Readable | Uint8Array | string,
    options: WriteFileOptions = {},
  ): Promise<void> {
    const target = this.resolve(p);
    if (options.append) {
      // O_APPEND under an exclusive flock: one call's bytes stay contiguous at any size, across processes.
      await this.appendFile(target, data, options.mode);
      return;
    }
    await fs.mkdir(path.dirname(target), { recursive: true });
    // Write beside the target and rename (or link, for exclusive) so readers never see half a file.
    const temp = path.join(
      path.dirname(target),
      `.${path.basename(target)}.tmp-${randomBytes(6).toString("hex")}`,
    );
    try {
      const handle = await fs.open(temp, "wx", options.mode ?? 0o644);
      await pipeline(toReadable(data), handle.createWriteStream() as Writable);
      if (options.exclusive) {
        await fs.link(temp, target).catch((error: unknown) => {
          throw fsError(error, target);
        });
      } else {
        await fs.rename(temp, target);
      }
    } finally {
      await fs.rm(temp, { force: true });
    }
  }

  private async appendFile(
    target: string,
    data: Readable | Uint8Array | string,
    mode?: number,
  ): Promise<void> {
    // O_NOFOLLOW: a symlink at the target is refused, never followed (the sandboxed backend's anchor).
    const open = () => fs.open(target, APPEND_NO_FOLLOW, mode);
    const handle = await open().catch(async (error: unknown) => {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw fsError(error, target);
      // Parent folder missing: create it once and retry (cheaper than a mkdir before every append).
      await fs.mkdir(path.dirname(target), { recursive: true });
      return open().catch((again: unknown) => {
        throw fsError(again, target);
      });
    });
    try {
      await appendUnderLock(handle, data, target);
    } catch (error) {
      throw isAppError(error) ? error : fsError(error, target);
    } finally {
      await handle.close();
    }
  }

  async stat(p: string): Promise<FileStat | null> {
    const info = await fs.lstat(this.resolve(p)).catch(nullOnMissing);
    return info ? toFileStat(info) : null;
  }

  async list(p: string): Promise<DirEntry[]> {
    const dir = this.resolve(p);
    const names = await fs.readdir(dir).catch((error: unknown) => {
      throw fsError(error, dir);
    });
    const entries = await Promise.all(
      names.map(async (name): Promise<DirEntry | null> => {
        const info = await fs.lstat(path.join(dir, name)).catch(nullOnMissing);
        if (!info) return null; // deleted between readdir and lstat
        const stat = toFileStat(info);
        return {
          name,
          type: stat.type,
          size: stat.type === "directory" ? null : stat.size,
          mtimeMs: stat.mtimeMs,
        };
      }),
    );
    return entries.filter((entry): entry is DirEntry => entry !== null);
  }

  async mkdir(p: string): Promise<void> {
    await fs.mkdir(this.resolve(p), { recursive: true });
  }

  /** In yielding batches: a session's or an agent's folder can be big, and this process serves others. */
  async remove(p: string): Promise<void> {
    await deleteHostTree(this.resolve(p));
  }

  async move(from: string, to: string): Promise<void> {
    const source = this.resolve(from);
    const target = this.resolve(to);
    await fs.mkdir(path.dirname(target), { recursive: true });
    try {
      await fs.rename(source, target);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw fsError(error, source);
      // Different filesystems (e.g. a tmpfs mount inside the workdir): copy, then delete.
      await fs.cp(source, target, { recursive: true, force: true, verbatimSymlinks: true });
      await fs.rm(source, { recursive: true, force: true });
    }
  }

  async realpath(p: string): Promise<string | null> {
    return fs.realpath(this.resolve(p)).catch(nullOnMissing);
  }

  hostPath(p: string): string {
    return this.resolve(p);
  }

  async putArchive(dir: string, tar: Readable): Promise<void> {
    const target = this.resolve(dir);
    await fs.mkdir(target, { recursive: true });
    const result = await this.exec(
      ["tar", "-x", "-f", "-", "-C", target, "--no-same-owner", "--same-permissions"],
      {
        cwd: target,
        stdin: tar,
        maxBufferBytes: 64 * 1024,
      },
    );
    if (result.exitCode !== 0) {
      throw new AppError(
        "INTERNAL",
        `tar extraction failed (${result.exitCode}): ${result.stderr.toString()}`,
      );
    }
  }

  async getArchive(p: string): Promise<Readable> {
    const target = this.resolve(p);
    await fs.lstat(target).catch((error: unknown) => {
      throw fsError(error, target);
    });
    // cwd rather than `-C`: the child changes directory before exec, while it still holds Berth's fds, so
    // the sandboxed backend can pass a parent it opened (/proc/self/fd/<fd>) that no swap can redirect.
    const child = spawn("tar", ["-c", "-f", "-", path.basename(target)], {
      cwd: path.dirname(target),
      env: this.env as NodeJS.ProcessEnv,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString();
    });
    // Hand out our own PassThrough, not the child's stdout: if tar exits before the caller starts
    // reading, Node discards a child pipe's unread data, and the archive would come out truncated.
    const out = child.stdout.pipe(new PassThrough());
    child.on("close", (code) => {
      if (code !== 0) out.destroy(new AppError("INTERNAL", `tar creation failed (${code}): ${stderr}`));
    });
    child.on("error", (error) => out.destroy(error));
    return out;
  }

  async close(): Promise<void> {
    // Nothing to release: the host filesystem stays where it is.
  }
}

function toReadable(data: Readable | Uint8Array | string): Readable {
  return data instanceof Readable
    ? data
    : Readable.from([typeof data === "string" ? Buffer.from(data) : data]);
}

export function toFileStat(info: Stats): FileStat {
  const type = info.isFile()
    ? "file"
    : info.isDirectory()
      ? "directory"
      : info.isSymbolicLink()
        ? "symlink"
        : "other";
  return { type, size: info.size, mtimeMs: info.mtimeMs, mode: info.mode & 0o7777 };
}

function nullOnMissing(error: unknown): null {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT" || code === "ENOTDIR") return null;
  throw error;
}

/** Maps the errno codes callers can act on to AppError; anything else stays INTERNAL. */
export function fsError(error: unknown, p: string): AppError {
  const code = (error as NodeJS.ErrnoException).code;
  const details = { path: p, errno: code };
  switch (code ?? "") {
    case "ENOENT":
      return new AppError("NOT_FOUND", `No such file or directory: ${p}`, { cause: error, details });
    case "ENOTDIR":
      return new AppError("BAD_REQUEST", `Not a directory: ${p}`, { cause: error, details });
    case "EISDIR":
      return new AppError("BAD_REQUEST", `Path is a directory: ${p}`, { cause: error, details });
    case "EEXIST":
      return new AppError("CONFLICT", `Already exists: ${p}`, { cause: error, details });
    case "EACCES":
    case "EPERM":
      return new AppError("FORBIDDEN", `Permission denied: ${p}`, { cause: error, details });
    default:
      return new AppError("INTERNAL", `Filesystem error on ${p}: ${String(error)}`, {
        cause: error,
        details,
      });
  }
}

/** True when `p` is an existing directory (false for anything missing or unreadable). */
export async function isDirectory(p: string): Promise<boolean> {
  const info = await fs.stat(p).catch(() => null);
  return info?.isDirectory() ?? false;
}
