import { randomBytes } from "node:crypto";
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import type { Duplex, Readable } from "node:stream";
import { AppError } from "@/server/shared/errors";
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
import {
  DEFAULT_LOCAL_PATH,
  fsError,
  HostFolderMachine,
} from "@/server/workspace/drivers/host-folder/host-folder-machine";
import { execOnHost } from "@/server/workspace/drivers/host-folder/host-exec";
import { workspaceVanished } from "@/server/workspace/drivers/vanished";
import { isInside } from "@/server/workspace/paths";
import { mkdirAnchored, withAnchoredDir, withAnchoredParent } from "./anchored-paths";
import { sandboxArgv, type SandboxIdentity, type SandboxMount } from "./sandbox-args";
import {
  SANDBOX_EGRESS_DIR,
  SANDBOX_GATEWAY_BUNDLE,
  SANDBOX_WORKDIR,
  type TSandboxConfig,
} from "./sandbox-config";
import { traversableTree } from "./sandbox-dirs";
import { startSandboxGateway, writeGatewayBundle, type SandboxGateway } from "./sandbox-gateway";
import { MachineEgress, type EgressGrant, type EgressLease } from "@/server/workspace/egress/machine-egress";
import type { SandboxRegistry } from "./sandbox-registry";
import { openSandboxPty } from "./sandbox-pty";
import { openSandboxTunnel } from "./sandbox-tunnel";
import { SandboxView } from "./sandbox-view";

export type BubblewrapBackendOptions = {
  config: TSandboxConfig;
  /** The workspace's host folder (a realpath). */
  hostWorkdir: string;
  key: string;
  identity: SandboxIdentity;
  registry: SandboxRegistry;
};

/** What a long-lived sandbox (the MCP gateway) needs beyond a command's. */
export type SandboxSpawnExtras = {
  /** Host paths mounted at `target` (opened by Berth, passed to bwrap by fd). */
  mounts: Array<Omit<SandboxMount, "hostFd"> & { hostPath: string }>;
  tmpfs: string[];
};

/**
 * The default `local` backend: host folders, but every command runs in a bubblewrap sandbox as the
 * workspace's unprivileged uid (see README.md). Paths are the sandbox's: the workdir is `/workspace`.
 * File operations run in Berth's process on the host folder, through the sandbox's view of paths (so a
 * symlink cannot point them anywhere the agent's shell could not go) and hand what they create to the
 * workspace uid, so the agent can edit what the tools wrote and the tools can edit what the agent wrote.
 */
export class BubblewrapMachine implements WorkspaceMachine {
  readonly workdir = SANDBOX_WORKDIR;
  readonly view: SandboxView;
  private readonly files: HostFolderMachine;
  private readonly env: Record<string, string>;
  private gateway: Promise<SandboxGateway> | null = null;
  /** This process' egress proxy of the workspace (egress/machine-egress.ts), started by the first grant. */
  private readonly egress: MachineEgress;

  constructor(readonly options: BubblewrapBackendOptions) {
    this.view = new SandboxView(options.hostWorkdir);
    this.files = new HostFolderMachine({ workdir: options.hostWorkdir });
    this.env = {
      PATH: DEFAULT_LOCAL_PATH,
      HOME: SANDBOX_WORKDIR,
      LANG: "C.UTF-8",
      ...options.config.env,
    };
    const egressDir = path.join(
      options.config.runtimeRoot,
      "eg",
      `${options.key}-${process.pid}-${randomBytes(4).toString("hex")}`,
    );
    this.egress = new MachineEgress({
      hostSocketPath: path.join(egressDir, "proxy.sock"),
      machineSocketPath: `${SANDBOX_EGRESS_DIR}/proxy.sock`,
    });
  }

  get hostWorkdir(): string {
    return this.options.hostWorkdir;
  }

  exec(command: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    const ceiling = this.options.config.commandTimeoutMs;
    const timeoutMs = Math.min(
      options.timeoutMs && options.timeoutMs > 0 ? options.timeoutMs : ceiling,
      ceiling,
    );
    const egress = this.egress.wrap(command, options.env, [
      fs.realpathSync(process.execPath),
      SANDBOX_GATEWAY_BUNDLE,
    ]);
    const run = { ...options, timeoutMs, env: egress.env };
    if (!egress.wrapped) return this.runSandboxed(command, run);
    return this.runWithEgress(egress.command, run);
  }

  /** Egress for the commands that carry the lease's env (see port.ts and egress/). */
  async openEgress(grant: EgressGrant): Promise<EgressLease> {
    const { runtimeRoot } = this.options.config;
    await traversableTree(runtimeRoot, path.join(runtimeRoot, "eg"));
    return this.egress.open(grant);
  }

  /** A command behind the forwarder: the proxy's socket folder and the gateway bundle are mounted read-only. */
  private async runWithEgress(command: readonly string[], options: ExecOptions): Promise<ExecResult> {
    const bundle = await writeGatewayBundle(this.options.config.runtimeRoot);
    return this.runSandboxed(command, options, {
      tmpfs: ["/run", "/opt"],
      mounts: [
        { hostPath: this.egress.hostSocketDir, target: SANDBOX_EGRESS_DIR, readOnly: true },
        { hostPath: bundle, target: SANDBOX_GATEWAY_BUNDLE, readOnly: true },
      ],
    });
  }

  /** A terminal: the same sandbox as a command's, on a host PTY (sandbox-pty.ts). */
  openPty(options: PtyOptions): Promise<PtyProcess> {
    const { config, hostWorkdir, key, identity, registry } = this.options;
    return openSandboxPty({ config, hostWorkdir, key, identity, registry, env: this.env }, options);
  }

  /** A preview tunnel into the sandbox that listens on `port` (sandbox-tunnel.ts: why not the gateway). */
  openTunnel(port: number): Promise<Duplex> {
    return openSandboxTunnel(this.options, port);
  }

  /** One sandbox around `command`; also what the gateway is started with (`extras`). */
  runSandboxed(
    command: readonly string[],
    options: ExecOptions,
    extras: SandboxSpawnExtras = { mounts: [], tmpfs: [] },
  ): Promise<ExecResult> {
    const cwd = path.posix.resolve(SANDBOX_WORKDIR, options.cwd ?? SANDBOX_WORKDIR);
    const { config, key, identity, registry } = this.options;
    // Opened by Berth, mounted by fd: bwrap runs unprivileged and needs no access to the host path.
    let fds: number[];
    try {
      fds = [this.options.hostWorkdir, ...extras.mounts.map((mount) => mount.hostPath)].map((p) =>
        fs.openSync(p, fs.constants.O_RDONLY),
      );
    } catch (error) {
      // The workspace folder is gone (deleted outside Berth): say so, never the host path's ENOENT.
      if (!fs.existsSync(this.options.hostWorkdir)) return Promise.reject(workspaceVanished(this, error));
      throw error;
    }
    const argv = sandboxArgv(
      config,
      {
        key,
        identity,
        cwd,
        workdirFd: 3,
        tmpfs: extras.tmpfs,
        mounts: extras.mounts.map(({ target, readOnly }, index) => ({ target, readOnly, hostFd: 4 + index })),
        cgroupProcs: registry.cgroupOf(key),
      },
      command,
    );
    const result = execOnHost(argv, {
      ...options,
      cwd: "/",
      env: { ...this.env, ...options.env },
      spawn: {
        extraFds: fds,
        onSpawn: (pid) => registry.record(key, pid),
        onExit: (pid) => registry.forget(key, pid),
      },
    });
    for (const fd of fds) fs.closeSync(fd);
    return result.then(withNotFoundAs127);
  }

  async readFile(p: string, options: { start?: number; end?: number } = {}): Promise<Readable> {
    const target = this.view.toHost(p);
    const handle = await fsp.open(target, "r").catch((error: unknown) => {
      throw fsError(error, p);
    });
    // The path was checked before the open; what was opened is checked after it (a symlink swapped in
    // between by the agent's shell must not make Berth read a host file).
    const opened = await fsp.realpath(`/proc/self/fd/${handle.fd}`).catch(() => "");
    if (!isInside(this.options.hostWorkdir, opened)) {
      await handle.close();
      throw new AppError("FORBIDDEN", `Path escapes the workspace: ${p}`, { details: { path: p } });
    }
    if ((await handle.stat()).isDirectory()) {
      await handle.close();
      throw new AppError("BAD_REQUEST", `Path is a directory: ${p}`, { details: { path: p } });
    }
    return handle.createReadStream({ start: options.start, end: options.end, autoClose: true });
  }

  // Every host file operation below goes through an opened parent directory (anchored-paths.ts): the
  // agent's shell may swap a directory for a symlink at any moment, and Berth acts as root here.

  async writeFile(p: string, data: Readable | Uint8Array | string, options: WriteFileOptions = {}) {
    const target = this.view.toHost(p);
    const createdDir = await this.mkdirHost(path.dirname(target));
    await this.anchored(target, async (anchored) => {
      await this.files.writeFile(anchored, data, options);
      await this.handOverAnchored(anchored);
    });
    if (createdDir) await this.handOverTree(createdDir, path.dirname(target));
  }

  async stat(p: string): Promise<FileStat | null> {
    if (!this.view.isInWorkspace(p)) return null;
    const target = this.view.toHost(p);
    return withAnchoredParent(this.hostWorkdir, target, (anchored) => this.files.stat(anchored)).catch(
      (error: unknown) => {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "ENOENT" || code === "ENOTDIR") return null;
        throw this.inWorkspaceTerms(error, target);
      },
    );
  }

  list(p: string): Promise<DirEntry[]> {
    const dir = this.view.toHost(p);
    return withAnchoredDir(this.hostWorkdir, dir, (anchored) => this.files.list(anchored)).catch(
      (error: unknown) => {
        throw this.inWorkspaceTerms(error, dir);
      },
    );
  }

  async mkdir(p: string): Promise<void> {
    const target = this.view.toHost(p);
    const created = await this.mkdirHost(target);
    if (created) await this.handOverTree(created, target);
  }

  /** A file goes by unlink through its anchor; a directory tree inside a sandbox, as the workspace uid. */
  async remove(p: string): Promise<void> {
    const target = this.view.toHost(p);
    if (target === this.hostWorkdir) throw new AppError("FORBIDDEN", "The workspace root cannot be removed");
    const isTree = await withAnchoredParent(this.hostWorkdir, target, async (anchored) => {
      const info = await fsp.lstat(anchored).catch(() => null);
      if (!info) return false;
      if (info.isDirectory()) return true;
      await fsp.unlink(anchored).catch((error: unknown) => {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      });
      return false;
    }).catch((error: unknown) => {
      // Nothing there (its parent is missing or a file): removing it is already done.
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR") return false;
      throw this.inWorkspaceTerms(error, target);
    });
    if (!isTree) return;
    const inSandbox = path.posix.join(SANDBOX_WORKDIR, path.relative(this.hostWorkdir, target));
    const result = await this.runSandboxed(["rm", "-rf", "--", inSandbox], { timeoutMs: 120_000 });
    if (result.exitCode !== 0) {
      throw new AppError("INTERNAL", `Could not remove ${p}: ${result.stderr.toString().slice(0, 500)}`);
    }
  }

  async move(from: string, to: string): Promise<void> {
    const source = this.view.toHost(from);
    const target = this.view.toHost(to);
    const created = await this.mkdirHost(path.dirname(target));
    await this.anchored(source, (anchoredSource) =>
      this.anchored(target, (anchoredTarget) =>
        fsp.rename(anchoredSource, anchoredTarget).catch((error: unknown) => {
          throw this.inWorkspaceTerms(error, source);
        }),
      ),
    );
    if (created) await this.handOverTree(created, path.dirname(target));
  }

  realpath(p: string): Promise<string | null> {
    return this.view.realpath(p);
  }

  /** Extracted INSIDE the sandbox, as the workspace user: links resolve in its view, files are its own. */
  async putArchive(dir: string, tar: Readable): Promise<void> {
    const target = path.posix.resolve(SANDBOX_WORKDIR, dir);
    await this.mkdir(target);
    const result = await this.runSandboxed(
      ["tar", "-x", "-f", "-", "-C", target, "--no-same-owner", "--same-permissions"],
      {
        cwd: target,
        stdin: tar,
        maxBufferBytes: 64 * 1024,
        timeoutMs: this.options.config.commandTimeoutMs,
      },
    );
    if (result.exitCode !== 0) {
      throw new AppError(
        "INTERNAL",
        `tar extraction failed (${result.exitCode}): ${result.stderr.toString()}`,
      );
    }
  }

  /** tar starts in the opened parent (its cwd is set before exec, while it holds the fd), never by name. */
  getArchive(p: string): Promise<Readable> {
    return this.anchored(this.view.toHost(p), (anchored) => this.files.getArchive(anchored));
  }

  /**
   * This process' MCP gateway of the workspace, started on first use (and again after it died). Its
   * stdio MCP servers live in its sandbox.
   */
  mcpGateway(): Promise<SandboxGateway> {
    if (this.gateway) return this.gateway;
    const starting = startSandboxGateway(this);
    this.gateway = starting;
    const forget = () => {
      if (this.gateway === starting) this.gateway = null;
    };
    starting.then((running) => void running.exited.then(forget), forget);
    return starting;
  }

  /** Ends this process' gateway and with it its MCP servers (commands end with their own sandbox). */
  async close(): Promise<void> {
    const gateway = this.gateway;
    this.gateway = null;
    await this.egress.close();
    if (gateway)
      await gateway.then(
        (running) => running.stop(),
        () => undefined,
      );
  }

  private anchored<T>(hostTarget: string, operation: (anchored: string) => Promise<T>): Promise<T> {
    return withAnchoredParent(this.hostWorkdir, hostTarget, operation).catch((error: unknown) => {
      throw this.inWorkspaceTerms(error, hostTarget);
    });
  }

  /**
   * A filesystem failure as the agent would name it (`/workspace/…`): neither the host folder nor the
   * anchor (`/proc/self/fd/…`) means anything to a caller.
   */
  private inWorkspaceTerms(error: unknown, hostTarget: string): unknown {
    const cause = error instanceof AppError ? error.cause : error;
    if (error instanceof AppError && cause === undefined) return error;
    if (typeof (cause as NodeJS.ErrnoException | undefined)?.code !== "string") return error;
    const shown = path.posix.join(SANDBOX_WORKDIR, path.relative(this.hostWorkdir, hostTarget));
    return fsError(cause, shown);
  }

  /** mkdir -p on the host, level by level through anchors; returns the first directory it created. */
  private async mkdirHost(target: string): Promise<string | undefined> {
    return mkdirAnchored(this.hostWorkdir, target).catch((error: unknown) => {
      throw this.inWorkspaceTerms(error, target);
    });
  }

  private async handOver(hostPath: string): Promise<void> {
    await this.anchored(hostPath, (anchored) => this.handOverAnchored(anchored)).catch(() => undefined);
  }

  private async handOverAnchored(anchored: string): Promise<void> {
    const { uid, gid, dropped } = this.options.identity;
    if (!dropped) return; // Berth's uid is the sandbox's: nothing to hand over
    await fsp.lchown(anchored, uid, gid).catch(() => undefined);
  }

  /** Hands over `from` and every directory between it and `to` (what one mkdir -p created). */
  private async handOverTree(from: string, to: string): Promise<void> {
    let current = to;
    for (;;) {
      await this.handOver(current);
      if (current === from || !isInside(from, current)) return;
      current = path.dirname(current);
    }
  }
}

/**
 * bwrap reports a command it cannot start as its own failure (exit 1, "bwrap: execvp NAME: No such file or
 * directory" on stderr); the port promises 127 then, as a shell would.
 */
function withNotFoundAs127(result: ExecResult): ExecResult {
  if (result.exitCode !== 1 || result.stdout.length > 0) return result;
  const stderr = result.stderr.toString("utf8");
  return /^bwrap: execvp [^\n]*: No such file or directory\n?$/.test(stderr)
    ? { ...result, exitCode: 127 }
    : result;
}
