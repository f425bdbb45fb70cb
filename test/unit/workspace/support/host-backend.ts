import { spawn } from "node:child_process";
import { createReadStream, createWriteStream } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { AppError } from "@/server/shared/errors";
import type {
  DirEntry,
  ExecOptions,
  ExecResult,
  FileStat,
  WorkspaceBackend,
} from "@/server/workspace/backend/port";

/**
 * A minimal host backend for the MCP/skills tests, used until the real local backend lands. It honours
 * the port's contract where the tests depend on it (streams, NOT_FOUND, lstat semantics, tar in/out) and
 * nothing more: exec is a plain spawn without process-group handling.
 */
export class TestHostBackend implements WorkspaceBackend {
  readonly kind = "local" as const;
  readonly isolated = false;

  constructor(readonly workdir: string) {}

  private resolve(p: string): string {
    return path.resolve(this.workdir, p);
  }

  exec(command: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    return new Promise((resolve) => {
      const [file, ...args] = command;
      const child = spawn(file ?? "true", args, { cwd: options.cwd ?? this.workdir });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on("data", (c: Buffer) => out.push(c));
      child.stderr.on("data", (c: Buffer) => err.push(c));
      child.on("error", () =>
        resolve({
          exitCode: 127,
          stdout: Buffer.alloc(0),
          stderr: Buffer.concat(err),
          timedOut: false,
          killed: false,
          truncated: false,
        }),
      );
      child.on("close", (code) =>
        resolve({
          exitCode: code ?? -1,
          stdout: Buffer.concat(out),
          stderr: Buffer.concat(err),
          timedOut: false,
          killed: false,
          truncated: false,
        }),
      );
      child.stdin.end();
    });
  }

  async readFile(p: string, options: { start?: number; end?: number } = {}): Promise<Readable> {
    const full = this.resolve(p);
    const stat = await fs.stat(full).catch(() => null);
    if (!stat?.isFile()) throw new AppError("NOT_FOUND", `No such file: ${p}`);
    return createReadStream(full, options);
  }

  async writeFile(
    p: string,
    data: Readable | Uint8Array | string,
    options: { mode?: number; append?: boolean } = {},
  ): Promise<void> {
    const full = this.resolve(p);
    await fs.mkdir(path.dirname(full), { recursive: true });
    const source = data instanceof Readable ? data : Readable.from([Buffer.from(data)]);
    await pipeline(
      source,
      createWriteStream(full, { flags: options.append ? "a" : "w", mode: options.mode }),
    );
  }

  async stat(p: string): Promise<FileStat | null> {
    const s = await fs.lstat(this.resolve(p)).catch(() => null);
    if (!s) return null;
    const type = s.isFile()
      ? "file"
      : s.isDirectory()
        ? "directory"
        : s.isSymbolicLink()
          ? "symlink"
          : "other";
    return { type, size: s.size, mtimeMs: s.mtimeMs, mode: s.mode };
  }

  async list(p: string): Promise<DirEntry[]> {
    const full = this.resolve(p);
    const names = await fs.readdir(full).catch(() => {
      throw new AppError("NOT_FOUND", `No such directory: ${p}`);
    });
    const entries: DirEntry[] = [];
    for (const name of names) {
      const s = await this.stat(path.join(full, name));
      if (!s) continue;
      entries.push({
        name,
        type: s.type,
        size: s.type === "directory" ? null : s.size,
        mtimeMs: s.mtimeMs,
      });
    }
    return entries;
  }

  async mkdir(p: string): Promise<void> {
    await fs.mkdir(this.resolve(p), { recursive: true });
  }

  async remove(p: string): Promise<void> {
    await fs.rm(this.resolve(p), { recursive: true, force: true });
  }

  async move(from: string, to: string): Promise<void> {
    await fs.mkdir(path.dirname(this.resolve(to)), { recursive: true });
    await fs.rename(this.resolve(from), this.resolve(to));
  }

  async realpath(p: string): Promise<string | null> {
    return fs.realpath(this.resolve(p)).catch(() => null);
  }

  async putArchive(dir: string, tar: Readable): Promise<void> {
    const full = this.resolve(dir);
    await fs.mkdir(full, { recursive: true });
    const child = spawn("tar", ["-x", "--no-same-owner", "-C", full, "-f", "-"], {
      stdio: ["pipe", "ignore", "pipe"],
    });
    const stderr: Buffer[] = [];
    child.stderr.on("data", (c: Buffer) => stderr.push(c));
    const exited = new Promise<number>((resolve) => child.on("close", (code) => resolve(code ?? -1)));
    try {
      await pipeline(tar, child.stdin);
    } catch (error) {
      child.kill();
      await exited;
      throw error;
    }
    const code = await exited;
    if (code !== 0) throw new AppError("INTERNAL", `tar -x failed: ${Buffer.concat(stderr).toString()}`);
  }

  async getArchive(p: string): Promise<Readable> {
    const full = this.resolve(p);
    if (!(await this.stat(full))) throw new AppError("NOT_FOUND", `No such path: ${p}`);
    const child = spawn("tar", ["-c", "-C", path.dirname(full), "-f", "-", path.basename(full)], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    return child.stdout;
  }

  async close(): Promise<void> {}
}
