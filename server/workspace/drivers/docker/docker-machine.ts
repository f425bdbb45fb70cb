import { randomBytes } from "node:crypto";
import path from "node:path";
import { type Duplex, Readable } from "node:stream";
import type Docker from "dockerode";
import { AppError, isAppError } from "@/server/shared/errors";
import type {
  DirEntry,
  ExecOptions,
  ExecResult,
  FileStat,
  PtyOptions,
  PtyProcess,
  WorkspaceMachine,
  WriteFileOptions,
} from "@/server/workspace/drivers/port";
import { canFallBack, type GatewayFileClient } from "@/server/workspace/gateway/client/gateway-files";
import { workspaceVanished } from "@/server/workspace/drivers/vanished";
import { MachineEgress, type EgressGrant, type EgressLease } from "@/server/workspace/egress/machine-egress";
import { CONTAINER_PATHS } from "./docker-config";
import { runExec, startExec, type ExecIdentity } from "./docker-exec";
import { openDockerPty } from "./docker-pty";
import { isSameHostFolder } from "./host-folder";
import { ScriptFiles } from "@/server/workspace/drivers/exec-scripts/script-files";

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
  /**
   * The host folder bind-mounted at the workdir and its identity when attached (host-folder.ts). Deleted or
   * replaced outside Berth, the container keeps running on the deleted folder: commands fail with Docker's
   * "possible container breakout detected", listings come back empty. Every operation checks it first (one
   * stat, microseconds beside an exec or a gateway round trip) and says `workspaceVanished` instead.
   */
  hostFolder?: { path: string; identity: string };
  /** Preview tunnels through the in-container gateway (docker-gateway.ts). */
  openTunnel?: (port: number) => Promise<Duplex>;
  /** The container's runtime folder on the host (bind-mounted at /run/berth): where the egress proxy listens. */
  hostRuntimeDir?: string;
};

/**
 * The workspace backend inside a Docker container. Commands run as the non-root workspace user through
 * `docker exec`. File operations go through the gateway's file endpoints (a process running as the same
 * user inside the container, ~1 ms per call over the bind-mounted socket) and, when it cannot take them,
 * through shell scripts run by `docker exec` (server/workspace/drivers/exec-scripts/file-scripts.ts, one runc round trip each). Either
 * way permissions and symlinks resolve inside the container, and bytes always stream: no file or archive
 * is ever held in memory whole. Archives stay on exec (tar does the work there).
 */
export class DockerMachine implements WorkspaceMachine {
  readonly workdir = CONTAINER_PATHS.workdir;
  private closed = false;
  /** Set once the gateway refused our token (rotated by another process): file operations use exec. */
  private gatewayTokenRevoked = false;
  /** File operations by `docker exec` scripts as the workspace user (exec-scripts/): the gateway's fallback. */
  private readonly scripts: ScriptFiles;

  /** This process' egress proxy of the container (egress/machine-egress.ts), started by the first grant. */
  private readonly egress: MachineEgress | null;

  constructor(private readonly options: DockerBackendOptions) {
    // One socket per process in the shared runtime folder: each process serves the grants of its own turns.
    const socketName = `egress-${process.pid}-${randomBytes(4).toString("hex")}.sock`;
    this.egress = options.hostRuntimeDir
      ? new MachineEgress({
          hostSocketPath: path.join(options.hostRuntimeDir, socketName),
          machineSocketPath: path.posix.join(CONTAINER_PATHS.runtimeDir, socketName),
        })
      : null;
    this.scripts = new ScriptFiles({
      run: async (argv, { stdin, maxBytes }) => {
        const result = await this.guard(() =>
          runExec(this.options.container, argv, this.identity(), {
            ...(stdin === undefined ? {} : { stdin }),
            maxBufferBytes: maxBytes,
          }),
        );
        return {
          exitCode: result.exitCode,
          stdout: result.stdout.toString("utf8"),
          stderr: result.stderr.toString("utf8"),
        };
      },
      start: async (argv, sink) => {
        const handle = await this.guard(() =>
          startExec(this.options.container, argv, this.identity(), { sink }),
        );
        return {
          resume: () => handle.resume(),
          abandon: () => void handle.kill(),
          finished: handle.finished,
        };
      },
    });
  }

  get container(): Docker.Container {
    return this.options.container;
  }

  /** True while the container runs on its host folder; a killed or removed container reports false. */
  async isAlive(): Promise<boolean> {
    const folder = this.options.hostFolder;
    if (folder && !(await isSameHostFolder(folder.path, folder.identity))) return false;
    try {
      return (await this.options.container.inspect()).State.Running;
    } catch {
      return false;
    }
  }

  async exec(given: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    // A command carrying an egress grant runs behind the forwarder (the image's gateway bundle, `egress` role).
    const egress = this.egress?.wrap(given, options.env, ["node", CONTAINER_PATHS.gatewayBundle]);
    const command = egress?.command ?? given;
    const env = egress ? egress.env : options.env;
    const result = await this.guard(() =>
      runExec(this.options.container, command, this.identity(options.cwd, env), options),
    );
    // The folder deleted while the command ran: the engine's refusal arrives as the command's output.
    if (result.exitCode !== 0) await this.assertHostFolder();
    return result;
  }

  /** A preview tunnel: the gateway connects to the port inside the container (its network namespace). */
  async openTunnel(port: number): Promise<Duplex> {
    if (!this.options.openTunnel) {
      throw new AppError("UNPROCESSABLE", "this Docker machine has no gateway tunnel", {
        details: { reason: "previews_unsupported" },
      });
    }
    await this.assertHostFolder();
    return this.options.openTunnel(port);
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
    return this.viaGateway(
      (files) => files.readFile(target, { start: options.start, end: options.end }),
      () => this.scripts.readFile(target, options),
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
    // A refused gateway write has not read a byte of `data` (100-continue), so exec can still send it.
    await this.viaGateway(
      (files) => files.writeFile(target, data, options),
      () => this.scripts.writeFile(target, data, options),
    );
  }

  async stat(p: string): Promise<FileStat | null> {
    const target = this.resolve(p);
    return this.viaGateway(
      (files) => files.stat(target),
      () => this.scripts.stat(target),
    );
  }

  async list(p: string): Promise<DirEntry[]> {
    const target = this.resolve(p);
    return this.viaGateway(
      (files) => files.list(target),
      () => this.scripts.list(target),
    );
  }

  async mkdir(p: string): Promise<void> {
    const target = this.resolve(p);
    await this.viaGateway(
      (files) => files.mkdir(target),
      () => this.scripts.mkdir(target),
    );
  }

  async remove(p: string): Promise<void> {
    const target = this.resolve(p);
    await this.viaGateway(
      (files) => files.remove(target),
      () => this.scripts.remove(target),
    );
  }

  async move(from: string, to: string): Promise<void> {
    const source = this.resolve(from);
    const target = this.resolve(to);
    await this.viaGateway(
      (files) => files.move(source, target),
      () => this.scripts.move(source, target),
    );
  }

  async realpath(p: string): Promise<string | null> {
    const target = this.resolve(p);
    return this.viaGateway(
      (files) => files.realpath(target),
      () => this.scripts.realpath(target),
    );
  }

  async putArchive(dir: string, archive: Readable): Promise<void> {
    await this.scripts.putArchive(this.resolve(dir), archive);
  }

  async getArchive(p: string): Promise<Readable> {
    return this.scripts.getArchive(this.resolve(p));
  }

  /** Stops the container; the workdir keeps every file. Idempotent. */
  /** Egress for the commands that carry the lease's env (see port.ts and egress/). */
  openEgress(grant: EgressGrant): Promise<EgressLease> {
    if (!this.egress) throw new AppError("UNAVAILABLE", "This workspace container has no egress folder");
    return this.egress.open(grant);
  }

  async close(): Promise<void> {
    await this.egress?.close();
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

  /** Runs a file operation through the gateway, or through exec when the gateway refused it untouched. */
  private async viaGateway<T>(
    gateway: (files: GatewayFileClient) => Promise<T>,
    exec: () => Promise<T>,
  ): Promise<T> {
    if (this.closed) throw new AppError("UNAVAILABLE", "The workspace container was closed");
    await this.assertHostFolder();
    const files = this.gatewayTokenRevoked ? null : this.options.files;
    if (files) {
      try {
        return await gateway(files);
      } catch (error) {
        await this.assertHostFolder();
        if (!canFallBack(error)) throw error;
        // Another process restarted the gateway with a new token: ours will not work again, so stop
        // paying a refused request per operation (the workspace re-attaches with the new token later).
        if (isAppError(error) && error.code === "UNAUTHORIZED") this.gatewayTokenRevoked = true;
      }
    }
    return exec();
  }

  /** Throws `workspaceVanished` (and marks this backend) once the bind-mounted host folder is gone or replaced. */
  private async assertHostFolder(): Promise<void> {
    const folder = this.options.hostFolder;
    if (folder && !(await isSameHostFolder(folder.path, folder.identity))) throw workspaceVanished(this);
  }

  /** Maps engine failures (container gone, engine down) to AppErrors the caller can act on. */
  private async guard<T>(operation: () => Promise<T>): Promise<T> {
    if (this.closed) throw new AppError("UNAVAILABLE", "The workspace container was closed");
    await this.assertHostFolder();
    try {
      return await operation();
    } catch (error) {
      await this.assertHostFolder();
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
