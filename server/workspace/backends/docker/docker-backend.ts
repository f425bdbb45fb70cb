import path from "node:path";
import { Readable } from "node:stream";
import type Docker from "dockerode";
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
import { canFallBack, type GatewayFileClient } from "@/server/workspace/gateway/client/gateway-files";
import { CONTAINER_PATHS } from "./docker-config";
import { runExec, startExec, type ExecIdentity } from "./docker-exec";
import { openDockerPty } from "./docker-pty";
import {
  parseList,
  parseStat,
  scriptError,
  SCRIPTS,
  streamScriptOutput,
} from "@/server/workspace/backend/file-scripts";

export type DockerBackendOptions = {
  container: Docker.Container;
  /** `uid:gid` every command and file operation runs as. */
  user: string;
  /** Environment every command starts from (PATH, HOME, LANG, configured extras). */
  env: Record<string, string>;
  /** Called by close(): stops the container (data stays in the bind-mounted workdir). */
  onClose?: () => Promise<void>;
  /**
   * The in-container gateway's file endpoints (null when the gateway is too old to serve them). File
   * operations go there first and fall back to `docker exec` scripts when the gateway refuses before
   * doing anything (not running, token rotated by another process, file worker down).
   */
  files?: GatewayFileClient | null;
};

/** Small script outputs (stat lines, listings) are capped well above anything legitimate. */
const SCRIPT_OUTPUT_CAP = 64 * 1024 * 1024;

/**
 * The workspace backend inside a Docker container. Commands run as the non-root workspace user through
 * `docker exec`. File operations go through the gateway's file endpoints (a process running as the same
 * user inside the container, ~1 ms per call over the bind-mounted socket) and, when it cannot take them,
 * through shell scripts run by `docker exec` (server/workspace/backend/file-scripts.ts, one runc round trip each). Either
 * way permissions and symlinks resolve inside the container, and bytes always stream: no file or archive
 * is ever held in memory whole. Archives stay on exec (tar does the work there).
 */
export class DockerBackend implements WorkspaceBackend {
  readonly kind = "docker" as const;
  readonly isolated = true;
  readonly workdir = CONTAINER_PATHS.workdir;
  private closed = false;
  /** Set once the gateway refused our token (rotated by another process): file operations use exec. */
  private gatewayTokenRevoked = false;

  constructor(private readonly options: DockerBackendOptions) {}

  get container(): Docker.Container {
    return this.options.container;
  }

  /** True while the container runs; a killed or removed container reports false. */
  async isAlive(): Promise<boolean> {
    try {
      return (await this.options.container.inspect()).State.Running;
    } catch {
      return false;
    }
  }

  exec(command: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    return this.guard(() =>
      runExec(this.options.container, command, this.identity(options.cwd, options.env), options),
    );
  }

  /** A terminal: `docker exec` with a TTY as the workspace user (docker-pty.ts). */
  openPty(options: PtyOptions): Promise<PtyProcess> {
    return this.guard(() =>
      openDockerPty(this.options.container, this.identity(options.cwd, options.env), options),
    );
  }

  async readFile(p: string, options: { start?: number; end?: number } = {}): Promise<Readable> {
    const target = this.resolve(p);
    const start = options.start ?? 0;
    if (options.end !== undefined && options.end < start) return Readable.from([]);
    const count = options.end !== undefined ? String(options.end - start + 1) : "";
    return this.viaGateway(
      (files) => files.readFile(target, { start: options.start, end: options.end }),
      () => this.streamScript(SCRIPTS.read, [target, start > 0 ? String(start) : "", count], target, "read"),
    );
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
    // A refused gateway write has not read a byte of `data` (100-continue), so exec can still send it.
    await this.viaGateway(
      (files) => files.writeFile(target, data, options),
      async () => {
        await this.runScript(SCRIPTS.write, [target, mode, octal], target, "write", data);
      },
    );
  }

  async stat(p: string): Promise<FileStat | null> {
    const target = this.resolve(p);
    return this.viaGateway(
      (files) => files.stat(target),
      () => this.statByExec(target),
    );
  }

  private async statByExec(target: string): Promise<FileStat | null> {
    try {
      return parseStat(await this.runScript(SCRIPTS.stat, [target], target, "stat"));
    } catch (error) {
      if (isAppError(error) && (error.code === "NOT_FOUND" || error.message.startsWith("Not a dir"))) {
        return null;
      }
      throw error;
    }
  }

  async list(p: string): Promise<DirEntry[]> {
    const target = this.resolve(p);
    return this.viaGateway(
      (files) => files.list(target),
      async () => parseList(await this.runScript(SCRIPTS.list, [target], target, "list")),
    );
  }

  async mkdir(p: string): Promise<void> {
    const target = this.resolve(p);
    await this.viaGateway(
      (files) => files.mkdir(target),
      async () => {
        await this.runScript(SCRIPTS.mkdir, [target], target, "mkdir");
      },
    );
  }

  async remove(p: string): Promise<void> {
    const target = this.resolve(p);
    await this.viaGateway(
      (files) => files.remove(target),
      async () => {
        await this.runScript(SCRIPTS.remove, [target], target, "remove");
      },
    );
  }

  async move(from: string, to: string): Promise<void> {
    const source = this.resolve(from);
    const target = this.resolve(to);
    await this.viaGateway(
      (files) => files.move(source, target),
      async () => {
        await this.runScript(SCRIPTS.move, [source, target], source, "move");
      },
    );
  }

  async realpath(p: string): Promise<string | null> {
    const target = this.resolve(p);
    return this.viaGateway(
      (files) => files.realpath(target),
      () => this.realpathByExec(target),
    );
  }

  private async realpathByExec(target: string): Promise<string | null> {
    const result = await this.guard(() =>
      runExec(
        this.options.container,
        ["/bin/sh", "-c", SCRIPTS.realpath, "realpath", target],
        this.identity(),
        {
          maxBufferBytes: 64 * 1024,
        },
      ),
    );
    return result.exitCode === 0 ? result.stdout.toString("utf8").replace(/\n$/, "") : null;
  }

  async putArchive(dir: string, archive: Readable): Promise<void> {
    const target = this.resolve(dir);
    await this.runScript(SCRIPTS.untar, [target], target, "extract", archive);
  }

  async getArchive(p: string): Promise<Readable> {
    const target = this.resolve(p);
    return this.streamScript(SCRIPTS.tar, [target], target, "archive");
  }

  /** Stops the container; the workdir keeps every file. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.options.onClose?.();
  }

  private resolve(p: string): string {
    if (p.includes("\0")) throw new AppError("BAD_REQUEST", "Path contains a NUL byte");
    return path.posix.resolve(this.workdir, p);
  }

  private identity(cwd?: string, env?: Record<string, string>): ExecIdentity {
    return {
      user: this.options.user,
      env: { ...this.options.env, ...env },
      cwd: cwd === undefined ? this.workdir : this.resolve(cwd),
    };
  }

  /** Runs a file script to completion; resolves with its stdout, rejects with the mapped AppError. */
  private async runScript(
    script: string,
    args: string[],
    reportedPath: string,
    action: string,
    stdin?: Readable | Uint8Array | string,
  ): Promise<string> {
    const result = await this.guard(() =>
      runExec(this.options.container, ["/bin/sh", "-c", script, action, ...args], this.identity(), {
        stdin,
        maxBufferBytes: SCRIPT_OUTPUT_CAP,
      }),
    );
    if (result.exitCode !== 0) {
      throw scriptError(result.exitCode, result.stderr.toString("utf8"), reportedPath, action);
    }
    return result.stdout.toString("utf8");
  }

  /** A script's stdout as a stream, with backpressure (file-scripts.ts). */
  private streamScript(
    script: string,
    args: string[],
    reportedPath: string,
    action: string,
  ): Promise<Readable> {
    return streamScriptOutput(
      async (sink) => {
        const handle = await this.guard(() =>
          startExec(this.options.container, ["/bin/sh", "-c", script, action, ...args], this.identity(), {
            sink,
          }),
        );
        return {
          resume: () => handle.resume(),
          abandon: () => void handle.kill(),
          finished: handle.finished,
        };
      },
      reportedPath,
      action,
    );
  }

  /** Runs a file operation through the gateway, or through exec when the gateway refused it untouched. */
  private async viaGateway<T>(
    gateway: (files: GatewayFileClient) => Promise<T>,
    exec: () => Promise<T>,
  ): Promise<T> {
    if (this.closed) throw new AppError("UNAVAILABLE", "The workspace container was closed");
    const files = this.gatewayTokenRevoked ? null : this.options.files;
    if (files) {
      try {
        return await gateway(files);
      } catch (error) {
        if (!canFallBack(error)) throw error;
        // Another process restarted the gateway with a new token: ours will not work again, so stop
        // paying a refused request per operation (the workspace re-attaches with the new token later).
        if (isAppError(error) && error.code === "UNAUTHORIZED") this.gatewayTokenRevoked = true;
      }
    }
    return exec();
  }

  /** Maps engine failures (container gone, engine down) to AppErrors the caller can act on. */
  private async guard<T>(operation: () => Promise<T>): Promise<T> {
    if (this.closed) throw new AppError("UNAVAILABLE", "The workspace container was closed");
    try {
      return await operation();
    } catch (error) {
      if (isAppError(error)) throw error;
      const status = (error as { statusCode?: number }).statusCode;
      if (status === 404 || status === 409) {
        throw new AppError("UNAVAILABLE", `The workspace container is not running: ${String(error)}`, {
          cause: error,
          userMessage: "The workspace container is not running",
          details: { statusCode: status },
        });
      }
      throw new AppError("UNAVAILABLE", `Docker engine error: ${String(error)}`, { cause: error });
    }
  }
}
