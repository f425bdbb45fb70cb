import { installationIdOf, type InstallationIdSource } from "@/server/workspace/drivers/installation";
import fs from "node:fs/promises";
import path from "node:path";
import Docker from "dockerode";
import { AppError } from "@/server/shared/errors";
import { workspaceVanished } from "@/server/workspace/drivers/vanished";
import { deleteHostTree } from "@/server/workspace/drivers/host-folder/host-tree-deleter";
import {
  loadGatewayBundle,
  readGatewayBundle,
  type GatewayBundle,
} from "@/server/workspace/gateway/bundle-gateway";
import { DockerMachine } from "./docker-machine";
import { workspaceFolder } from "@/server/workspace/drivers/host-folder/folder-layout";
import {
  CONTAINER_PATHS,
  containerKey,
  containerName,
  ZDockerDriverConfig,
  type DockerWorkspaceRef,
  type TDockerDriverConfig,
  type TDockerDriverConfigInput,
} from "./docker-config";
import { runRootChore } from "./docker-exec";
import { hostFolderIdentity } from "./host-folder";
import { gatewayCredentialsPath, startDockerGateway } from "./docker-gateway";
import {
  containerEnv,
  ensureRunningContainer,
  inspectOrNull,
  removeContainer,
  stopContainer,
} from "./workspace-container";
import { WorkspaceImageBuilder } from "./workspace-image";
import { pruneWorkspaceImages } from "./workspace-image-gc";
import { DockerWarmPool } from "./docker-warm-pool";
import type {
  DockerCreateEvent,
  DockerMachineHost,
  DockerWorkspaceHandle,
  DockerWorkspaceRequest,
  PlacedMachine,
} from "./docker-workspace-types";

export type {
  DockerCreateEvent,
  DockerWorkspaceHandle,
  DockerWorkspaceRequest,
} from "./docker-workspace-types";

export type DockerContainersDeps = {
  docker?: Docker;
  /** This installation's id, labelled on every container (see server/workspace/drivers/installation.ts). */
  installationId?: InstallationIdSource;
  /** Where the gateway bundle comes from (default: prebuilt file, else built from source). */
  loadGatewayBundle?: () => Promise<GatewayBundle>;
};

/**
 * Docker workspaces: one container per workspace id (`berth-ws-<id>`), reattached across process restarts
 * by its deterministic name, with the workdir bind-mounted from the host and the MCP gateway inside.
 */
export class DockerContainers implements DockerMachineHost {
  readonly config: TDockerDriverConfig;
  readonly docker: Docker;
  private readonly images: WorkspaceImageBuilder;
  private readonly bundle: () => Promise<GatewayBundle>;
  private readonly opening = new Map<string, Promise<DockerWorkspaceHandle>>();
  /** This installation's id (memoised; fails loudly when none was given). */
  readonly installationId: InstallationIdSource;
  /** Machines made before anyone asked, given to a workspace on its first use (docker-warm-pool.ts). */
  readonly warmPool: DockerWarmPool;

  constructor(config: TDockerDriverConfigInput, deps: DockerContainersDeps = {}) {
    this.config = ZDockerDriverConfig.parse(config);
    this.installationId = installationIdOf(deps.installationId);
    this.docker = deps.docker ?? new Docker({ socketPath: this.config.socketPath });
    this.images = new WorkspaceImageBuilder(this.docker, this.config);
    const prebuilt = this.config.gatewayBundlePath;
    this.bundle =
      deps.loadGatewayBundle ?? (prebuilt ? () => readGatewayBundle(prebuilt) : () => loadGatewayBundle());
    this.warmPool = new DockerWarmPool(this);
    const socket = path.join(this.config.runtimeRoot, "x".repeat(49), "gateway.sock");
    if (Buffer.byteLength(socket) > 107) {
      throw new AppError(
        "BAD_REQUEST",
        `runtimeRoot is too long for unix socket paths: ${this.config.runtimeRoot}`,
      );
    }
  }

  /**
   * Whether this process can hand a workdir to the workspace user with a host-side chown (no exec): it runs
   * as root and the engine maps no user namespace (rootless or userns-remap would shift the uid).
   */
  private ownersOnHost: Promise<boolean> | null = null;
  readonly hostSetsOwners = (): Promise<boolean> => {
    this.ownersOnHost ??= (async () => {
      if (process.getuid?.() !== 0) return false;
      const info = (await this.docker.info()) as { SecurityOptions?: string[] };
      return !(info.SecurityOptions ?? []).some((option) => /name=(userns|rootless)/.test(option));
    })().catch(() => false);
    return this.ownersOnHost;
  };

  /** Resolves once the engine answers; rejects with UNAVAILABLE and the reason otherwise. */
  async ping(): Promise<void> {
    try {
      await this.docker.ping();
    } catch (error) {
      throw new AppError(
        "UNAVAILABLE",
        `Docker engine not reachable at ${this.config.socketPath}: ${String(error)}`,
        {
          cause: error,
          userMessage: "The Docker engine is not reachable",
        },
      );
    }
  }

  /** Where a workspace's files live on the host (the host-folder drivers' layout). */
  hostWorkdirOf(ref: DockerWorkspaceRef): string {
    return workspaceFolder(this.config.dataRoot, ref);
  }

  private hostRuntimeDirOf(ref: DockerWorkspaceRef): string {
    return path.join(this.config.runtimeRoot, containerKey(ref));
  }

  /**
   * Create-or-reattach: builds the image if needed, gets the container running (replacing a dead one) and
   * (re)starts the gateway with a fresh token. Resolves as soon as commands can run; the gateway's health is
   * `handle.gateway.ready` (progress reports it). Concurrent calls for one id share one attempt.
   */
  open(request: DockerWorkspaceRequest): Promise<DockerWorkspaceHandle> {
    // An attach (which refuses a vanished folder) never shares a provision's attempt (which creates one).
    const id = `${containerKey(request)}${request.provisionedBefore ? ":attach" : ""}:${request.pool ?? ""}`;
    const pending = this.opening.get(id);
    if (pending) return pending;
    const attempt = this.openOnce(request).finally(() => this.opening.delete(id));
    this.opening.set(id, attempt);
    return attempt;
  }

  private async openOnce(request: DockerWorkspaceRequest): Promise<DockerWorkspaceHandle> {
    const { onProgress } = request;
    const ref: DockerWorkspaceRef = {
      tenantId: request.tenantId,
      userId: request.userId,
      workspaceId: request.workspaceId,
    };
    if (request.pool !== undefined) {
      const pooled = await this.warmPool.bound.open(request.pool, ref, request);
      if (pooled) return pooled;
    }
    const hostWorkdir = path.resolve(request.hostWorkdir ?? this.hostWorkdirOf(ref));
    const hostRuntimeDir = this.hostRuntimeDirOf(ref);
    if (!request.provisionedBefore) await fs.mkdir(hostWorkdir, { recursive: true });
    const workdirIdentity = await hostFolderIdentity(hostWorkdir);
    if (workdirIdentity === null) throw workspaceVanished();
    await fs.mkdir(hostRuntimeDir, { recursive: true, mode: 0o755 });

    const image = await this.ensureImage(onProgress);
    const { container, created, startedAt } = await ensureRunningContainer(this.docker, this.config, {
      ...ref,
      agentId: request.agentId,
      installation: await this.installationId(),
      image,
      hostWorkdir,
      workdirIdentity,
      provisionedBefore: request.provisionedBefore ?? false,
      hostRuntimeDir,
      ...(request.resources ? { resources: request.resources } : {}),
    });
    const name = containerName(ref);
    onProgress?.({ type: "container", state: created ? "created" : "reattached", name });

    onProgress?.({ type: "gateway", state: "starting" });
    const gateway = await startDockerGateway(
      container,
      this.config,
      { hostRuntimeDir, hostWorkdir, containerStartedAt: startedAt, hostSetsOwners: this.hostSetsOwners },
      {
        reuseToken: request.reuseToken ?? false,
        onReady: () => onProgress?.({ type: "gateway", state: "ready" }),
      },
    );
    return this.machineHandle({
      ref,
      name,
      container,
      gateway,
      hostWorkdir,
      workdirIdentity,
      hostRuntimeDir,
      reattached: !created,
    });
  }

  /** The handle over a running container and its gateway (a workspace's own, or a bound pool machine's). */
  machineHandle(placed: PlacedMachine): DockerWorkspaceHandle {
    const { name, gateway, hostWorkdir } = placed;
    const backend = new DockerMachine({
      container: placed.container,
      user: `${this.config.uid}:${this.config.gid}`,
      env: containerEnv(this.config),
      files: gateway.files,
      openTunnel: gateway.openTunnel,
      hostFolder: { path: hostWorkdir, identity: placed.workdirIdentity },
      hostRuntimeDir: placed.hostRuntimeDir,
      onClose: () => stopContainer(this.docker, name, this.config.stopTimeoutSeconds),
    });
    return {
      ref: placed.ref,
      containerName: name,
      ...(placed.pool === undefined ? {} : { pool: placed.pool }),
      backend,
      mcpConnector: gateway.connector,
      gateway,
      hostWorkdir,
      reattached: placed.reattached,
      isAlive: () => backend.isAlive(),
      close: () => backend.close(),
    };
  }

  /** The workspace image tag new machines get now (built or not: nothing is built here). */
  async imageTagNow(): Promise<string> {
    return this.images.currentTag(await this.bundle());
  }

  /** The workspace image new machines get now (built when missing; concurrent calls share one build). */
  async ensureImage(onProgress?: (event: DockerCreateEvent) => void): Promise<string> {
    return this.images.ensure(await this.bundle(), (progress) =>
      onProgress?.({ type: "image", ...progress }),
    );
  }

  /** True while the workspace's container runs (false when stopped, killed or removed). */
  async isAlive(ref: DockerWorkspaceRef): Promise<boolean> {
    const info = await inspectOrNull(this.docker.getContainer(containerName(ref)));
    return info?.State.Running ?? false;
  }

  /**
   * Removes workspace images of this repository that no container uses and new workspaces no longer get,
   * once older than `imageGcMinAgeMs` (see pruneWorkspaceImages). Returns the tags removed.
   */
  async pruneImages(options: { dryRun?: boolean; minAgeMs?: number } = {}): Promise<string[]> {
    const current = await this.images.currentTag(await this.bundle());
    return pruneWorkspaceImages(this.docker, {
      repository: this.config.imageRepository,
      keepTags: [current, ...this.images.building()],
      minAgeMs: options.minAgeMs ?? this.config.imageGcMinAgeMs,
      dryRun: options.dryRun ?? false,
    });
  }

  /** Stops the container and keeps container and data (the next open() reattaches). */
  async stop(ref: DockerWorkspaceRef): Promise<void> {
    await stopContainer(this.docker, containerName(ref), this.config.stopTimeoutSeconds);
  }

  /**
   * Removes the container AND the workspace's data. Files are deleted from inside the container first:
   * they belong to the workspace user, which the host process may not be allowed to delete.
   */
  async purge(ref: DockerWorkspaceRef, hostWorkdir?: string): Promise<void> {
    await this.removeMachine({
      name: containerName(ref),
      hostWorkdir: path.resolve(hostWorkdir ?? this.hostWorkdirOf(ref)),
      hostRuntimeDir: this.hostRuntimeDirOf(ref),
    });
  }

  /** What `purge` does for any container Berth runs a workspace in (a bound pool machine's too). */
  async removeMachine(machine: { name: string; hostWorkdir: string; hostRuntimeDir: string }): Promise<void> {
    const { name } = machine;
    const container = this.docker.getContainer(name);
    const info = await inspectOrNull(container);
    if (info) {
      try {
        if (!info.State.Running) await container.start();
        await runRootChore(container, ["find", CONTAINER_PATHS.workdir, "-mindepth", "1", "-delete"]);
      } catch {
        // A container that cannot run any more: the host-side removal below is all we can do.
      }
      await removeContainer(this.docker, name);
    }
    // Usually empty by now (the chore above); when the container could not run, the whole tree is left,
    // so in yielding batches: this process' event loop serves jobs and shutdown meanwhile.
    await deleteHostTree(machine.hostWorkdir);
    await fs.rm(machine.hostRuntimeDir, { recursive: true, force: true });
    await fs.rm(gatewayCredentialsPath(machine.hostRuntimeDir), { force: true });
  }
}
