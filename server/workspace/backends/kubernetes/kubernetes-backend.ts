import path from "node:path";
import { Readable } from "node:stream";
import { AppError, isAppError } from "@/server/shared/errors";
import type {
  DirEntry,
  ExecOptions,
  ExecResult,
  FileStat,
  PtyOptions,
  PtyProcess,
  WorkspaceBackend,
  WriteFileOptions,
} from "@/server/workspace/backend/port";
import {
  parseList,
  parseStat,
  scriptError,
  SCRIPTS,
  streamScriptOutput,
} from "@/server/workspace/backend/file-scripts";
import { runCommand, type PodExecutor } from "./pod-exec";
import { openPodPty } from "./pod-pty";
import { POD } from "./workspace-manifests";

export type KubernetesBackendOptions = {
  /** Exec into the Pod's `workspace` container (agent commands and file operations). */
  executor: PodExecutor;
  /** The Pod this backend was attached to (a replacement Pod of the same name is another machine). */
  podUid: string;
  /** A command's process group could not be killed at all: the driver deletes the Pod (the claim stays). */
  onUnkillable: () => Promise<void>;
  /** Releases this process' hold (the gateway tunnel); never stops the Pod. */
  onClose?: () => Promise<void>;
};

/** Small script outputs (stat lines, listings) are capped well above anything legitimate. */
const SCRIPT_OUTPUT_CAP = 64 * 1024 * 1024;

/**
 * The workspace backend inside a Kubernetes Pod. Every command and file operation is an exec over the API
 * server into the `workspace` container, as the Pod's non-root user: the container's permissions and path
 * resolution apply, and bytes stream both ways with backpressure (file contents and archives are never held
 * in memory; files are read and written by small shell scripts, archives by tar, and each call resolves only
 * when the remote side reported its exit status). Commands run in a session of their own, so a timeout or
 * abort kills the whole process tree through a second exec.
 */
export class KubernetesBackend implements WorkspaceBackend {
  readonly kind = "kubernetes" as const;
  readonly isolated = true;
  readonly workdir = POD.workdir;
  private closed = false;

  constructor(private readonly options: KubernetesBackendOptions) {}

  get podName(): string {
    return this.options.executor.target.pod;
  }

  get podUid(): string {
    return this.options.podUid;
  }

  exec(command: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    this.assertOpen();
    const cwd = options.cwd === undefined ? this.workdir : this.resolve(options.cwd);
    return runCommand(this.options.executor, command, {
      ...options,
      cwd,
      onUnkillable: this.options.onUnkillable,
    });
  }

  /** A terminal: `pods/exec` with a TTY in the workspace container (pod-pty.ts). */
  openPty(options: PtyOptions): Promise<PtyProcess> {
    this.assertOpen();
    const cwd = options.cwd === undefined ? this.workdir : this.resolve(options.cwd);
    return openPodPty(this.options.executor, { ...options, cwd, onUnkillable: this.options.onUnkillable });
  }

  async readFile(p: string, options: { start?: number; end?: number } = {}): Promise<Readable> {
    const target = this.resolve(p);
    const start = options.start ?? 0;
    if (options.end !== undefined && options.end < start) return Readable.from([]);
    const count = options.end !== undefined ? String(options.end - start + 1) : "";
    return this.streamScript(SCRIPTS.read, [target, start > 0 ? String(start) : "", count], target, "read");
  }

  async writeFile(
    p: string,
    data: Readable | Uint8Array | string,
    options: WriteFileOptions = {},
  ): Promise<void> {
    if (options.append && options.exclusive) {
      throw new AppError("BAD_REQUEST", "append and exclusive cannot be combined");
    }
    const target = this.resolve(p);
    const mode = options.append ? "append" : options.exclusive ? "exclusive" : "replace";
    const octal = options.mode !== undefined ? (options.mode & 0o7777).toString(8) : "";
    await this.runScript(SCRIPTS.write, [target, mode, octal], target, "write", data);
  }

  async stat(p: string): Promise<FileStat | null> {
    const target = this.resolve(p);
    try {
      return parseStat(await this.runScript(SCRIPTS.stat, [target], target, "stat"));
    } catch (error) {
      if (isAppError(error) && (error.code === "NOT_FOUND" || error.message.startsWith("Not a dir")))
        return null;
      throw error;
    }
  }

  async list(p: string): Promise<DirEntry[]> {
    const target = this.resolve(p);
    return parseList(await this.runScript(SCRIPTS.list, [target], target, "list"));
  }

  async mkdir(p: string): Promise<void> {
    const target = this.resolve(p);
    await this.runScript(SCRIPTS.mkdir, [target], target, "mkdir");
  }

  async remove(p: string): Promise<void> {
    const target = this.resolve(p);
    await this.runScript(SCRIPTS.remove, [target], target, "remove");
  }

  async move(from: string, to: string): Promise<void> {
    const source = this.resolve(from);
    const target = this.resolve(to);
    await this.runScript(SCRIPTS.move, [source, target], source, "move");
  }

  async realpath(p: string): Promise<string | null> {
    this.assertOpen();
    const target = this.resolve(p);
    const result = await this.options.executor.run(
      ["/bin/sh", "-c", SCRIPTS.realpath, "realpath", target],
      undefined,
      64 * 1024,
    );
    return result.exitCode === 0 ? result.stdout.replace(/\n$/, "") : null;
  }

  async putArchive(dir: string, archive: Readable): Promise<void> {
    const target = this.resolve(dir);
    await this.runScript(SCRIPTS.untar, [target], target, "extract", archive);
  }

  async getArchive(p: string): Promise<Readable> {
    const target = this.resolve(p);
    return this.streamScript(SCRIPTS.tar, [target], target, "archive");
  }

  /** Releases this process' connections; the Pod and its data stay. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.options.onClose?.();
  }

  private assertOpen(): void {
    if (this.closed) throw new AppError("UNAVAILABLE", "The workspace backend was closed");
  }

  private resolve(p: string): string {
    if (p.includes("\0")) throw new AppError("BAD_REQUEST", "Path contains a NUL byte");
    return path.posix.resolve(this.workdir, p);
  }

  /** Runs a file script to completion; resolves with its stdout, rejects with the mapped AppError. */
  private async runScript(
    script: string,
    args: string[],
    reportedPath: string,
    action: string,
    stdin?: Readable | Uint8Array | string,
  ): Promise<string> {
    this.assertOpen();
    const result = await this.options.executor.run(
      ["/bin/sh", "-c", script, action, ...args],
      stdin,
      SCRIPT_OUTPUT_CAP,
    );
    if (result.exitCode !== 0) throw scriptError(result.exitCode, result.stderr, reportedPath, action);
    return result.stdout;
  }

  /** A script's stdout as a stream, with backpressure (file-scripts.ts). */
  private streamScript(
    script: string,
    args: string[],
    reportedPath: string,
    action: string,
  ): Promise<Readable> {
    this.assertOpen();
    return streamScriptOutput(
      async (sink) => {
        const handle = await this.options.executor.start(["/bin/sh", "-c", script, action, ...args], {
          sink,
        });
        // Dropping the session is enough: the script dies on its broken pipe.
        return { resume: () => handle.resume(), abandon: () => handle.close(), finished: handle.finished };
      },
      reportedPath,
      action,
    );
  }
}
