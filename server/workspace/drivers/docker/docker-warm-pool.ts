import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import type Docker from "dockerode";
import { AppError } from "@/server/shared/errors";
import type { BackendHandle, WorkspaceResources } from "@/server/workspace/drivers/driver";
import { deleteHostTree } from "@/server/workspace/drivers/host-folder/host-tree-deleter";
import { LABELS, type DockerWorkspaceRef } from "./docker-config";
import type { DockerCreateEvent, DockerMachineHost } from "./docker-workspace-types";
import { startDockerGateway } from "./docker-gateway";
import {
  bindsTo,
  PoolPaths,
  poolContainerName,
  pooledHandle,
  ZPooledHandle,
  ZPoolId,
  type PoolBinding,
} from "./docker-pool-layout";
import { hostFolderIdentity } from "./host-folder";
import { BoundPoolMachines } from "./docker-pool-bound";
import {
  engineError,
  ensureRunning,
  inspectOrNull,
  machineCreateOptions,
  quotaLimits,
  removeContainer,
  statusOf,
} from "./workspace-container";

/** Bump when what a pool machine bakes in changes in a way the hashed create options do not show. */
const POOL_KEY_VERSION = 1;

/**
 * Docker's warm pool: containers `berth-pool-<id>` made with the same image and create options as a
 * workspace's, but no identity (labels managed, installation, pool id and key; a folder under
 * `<dataRoot>/.pool/`), started with a healthy gateway. Binding one to a workspace is a rename of its
 * folder into the workspace's path (the bind mount follows the inode) and a binding record on the host;
 * from then on the container is that workspace's, found through the stored handle `{ container, pool }`.
 */
export class DockerWarmPool {
  readonly paths: PoolPaths;
  /** What acts on a machine once it is bound: attach, restart, purge (docker-pool-bound.ts). */
  readonly bound: BoundPoolMachines;

  constructor(private readonly workspaces: DockerMachineHost) {
    this.paths = new PoolPaths(workspaces.config);
    this.bound = new BoundPoolMachines(workspaces, this.paths);
  }

  private get docker(): Docker {
    return this.workspaces.docker;
  }

  /** What a machine made now has baked in: the image tag (base image, gateway bundle) and create options. */
  async key(): Promise<string> {
    return this.keyOf(await this.workspaces.imageTagNow());
  }

  private keyOf(image: string): string {
    const { config } = this.workspaces;
    // Paths differ per machine and are not what it has baked in: placeholders keep the key per config.
    const options = machineCreateOptions(config, {
      image,
      hostWorkdir: "<workdir>",
      hostRuntimeDir: "<run>",
    });
    const inputs = { POOL_KEY_VERSION, options, user: [config.uid, config.gid], gateway: config.gateway };
    return createHash("sha256").update(JSON.stringify(inputs)).digest("hex").slice(0, 16);
  }

  /**
   * Create-or-get + start of `berth-pool-<id>`, its workdir handed to the workspace user and its gateway
   * healthy. Idempotent per id: a half-made one is finished, one of another key or folder replaced (it was
   * never bound). A bound id is refused: a bound machine never goes back to a pool.
   */
  async createIdleMachine(
    id: string,
    onProgress?: (event: DockerCreateEvent) => void,
  ): Promise<BackendHandle> {
    const poolId = parsePoolId(id);
    if (await this.paths.isBound(poolId)) {
      throw new AppError("CONFLICT", `pool machine ${poolId} is bound to a workspace`, {
        details: { pool: poolId },
      });
    }
    const hostWorkdir = this.paths.folder(poolId);
    const hostRuntimeDir = this.paths.runtimeDir(poolId);
    await fs.mkdir(this.paths.foldersRoot, { recursive: true, mode: 0o700 });
    // Only ever an empty folder of its own: never a link (a bound machine's restart makes one, briefly),
    // never one with files (nothing writes there before a bind), so no data of anyone is pooled.
    const found = await fs.lstat(hostWorkdir).catch(() => null);
    if (found && (!found.isDirectory() || (await fs.readdir(hostWorkdir)).length > 0)) {
      throw new AppError(
        "CONFLICT",
        `pool folder ${hostWorkdir} is not an empty folder: discard the machine`,
        {
          details: { pool: poolId },
        },
      );
    }
    await fs.mkdir(hostWorkdir, { recursive: true });
    await fs.mkdir(hostRuntimeDir, { recursive: true, mode: 0o755 });
    const workdirIdentity = await hostFolderIdentity(hostWorkdir);
    if (workdirIdentity === null) throw new AppError("UNAVAILABLE", `pool folder ${hostWorkdir} vanished`);

    const image = await this.workspaces.ensureImage(onProgress);
    const key = this.keyOf(image);
    const name = poolContainerName(poolId);
    const installation = await this.workspaces.installationId();
    const options: Docker.ContainerCreateOptions = {
      name,
      ...machineCreateOptions(this.workspaces.config, { image, hostWorkdir, hostRuntimeDir }),
      Labels: {
        [LABELS.managed]: "true",
        [LABELS.installation]: installation,
        [LABELS.pool]: poolId,
        [LABELS.poolKey]: key,
        [LABELS.workdir]: workdirIdentity,
      },
    };
    const { container, created, startedAt } = await ensureRunning(
      this.docker,
      options,
      installation,
      ({ Config: { Labels: labels } }) =>
        labels[LABELS.pool] === poolId &&
        labels[LABELS.poolKey] === key &&
        labels[LABELS.workdir] === workdirIdentity
          ? "use"
          : "replace",
    );
    onProgress?.({ type: "container", state: created ? "created" : "reattached", name });
    onProgress?.({ type: "gateway", state: "starting" });
    const gateway = await startDockerGateway(
      container,
      this.workspaces.config,
      {
        hostRuntimeDir,
        hostWorkdir,
        containerStartedAt: startedAt,
        hostSetsOwners: this.workspaces.hostSetsOwners,
      },
      { reuseToken: true, onReady: () => onProgress?.({ type: "gateway", state: "ready" }) },
    );
    // Idle means ready: a first command and MCP need nothing more.
    await gateway.ready;
    return pooledHandle(poolId);
  }

  /**
   * Gives the idle machine to the workspace `ref`: its folder is renamed to the workspace's path (the
   * running container's bind mount follows the inode, and its `<dev>:<inode>` stays the same) after a
   * binding record is written. No container is created or started here; a tenant's lower CPU or memory
   * quota is applied with one `docker update`. CONFLICT when the workspace folder has data already or the
   * machine is gone or bound; the machine is then left as it was.
   */
  async bind(
    id: string,
    handle: BackendHandle,
    ref: DockerWorkspaceRef,
    resources?: WorkspaceResources,
  ): Promise<BackendHandle> {
    const poolId = parsePoolId(id);
    const given = ZPooledHandle.safeParse(handle);
    if (!given.success || given.data.pool !== poolId) {
      throw new AppError("BAD_REQUEST", `handle ${JSON.stringify(handle)} is not pool machine ${poolId}'s`);
    }
    const target = this.workspaces.hostWorkdirOf(ref);
    const existing = await this.paths.readBinding(poolId);
    if (
      existing &&
      bindsTo(existing, ref) &&
      (await hostFolderIdentity(target)) === existing.workdirIdentity
    ) {
      return pooledHandle(poolId); // bound already by an earlier run of the same claim
    }
    if (await this.paths.isBound(poolId)) throw conflict(poolId, "it is bound to a workspace already");
    const source = this.paths.folder(poolId);
    const workdirIdentity = await hostFolderIdentity(source);
    if (workdirIdentity === null) throw conflict(poolId, "its folder is gone");
    if (await hasEntries(target)) {
      throw new AppError(
        "CONFLICT",
        `workspace folder ${target} has data: pool machine ${poolId} not bound`,
        {
          userMessage: "This workspace has data already; it cannot take a pooled machine.",
          details: { pool: poolId, reason: "workspace_has_data" },
        },
      );
    }
    const limits = quotaLimits(this.workspaces.config, resources);
    if (Object.keys(limits).length > 0) {
      await this.docker
        .getContainer(poolContainerName(poolId))
        .update(limits)
        .catch((error: unknown) => {
          throw statusOf(error) === 404
            ? conflict(poolId, "its container is gone")
            : engineError(error, "apply the workspace's limits");
        });
    }
    // The record first: a crash after the rename must leave a machine listed as the workspace's (reconcile
    // reaps it with the workspace), never one listed as idle that holds a workspace's folder.
    await this.paths.writeBinding(poolId, {
      poolId,
      ...ref,
      workdirIdentity,
      boundAt: new Date().toISOString(),
    });
    try {
      await fs.mkdir(path.dirname(target), { recursive: true });
      // Onto a missing or empty directory only: rename(2) refuses a non-empty one (ENOTEMPTY, EEXIST).
      await fs.rename(source, target);
    } catch (error) {
      await this.paths.removeBinding(poolId);
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOTEMPTY" || code === "EEXIST") throw conflict(poolId, "the workspace folder has data");
      throw new AppError("UNAVAILABLE", `Could not move pool machine ${poolId}'s folder: ${String(error)}`, {
        cause: error,
      });
    }
    return pooledHandle(poolId);
  }

  /**
   * Deletes an unbound machine: its container, folder and runtime dir. Idempotent. A bound one (binding
   * record present) is left alone: it is a workspace's now, and only `purge` deletes it.
   */
  async discard(id: string): Promise<void> {
    const poolId = parsePoolId(id);
    if (await this.paths.isBound(poolId)) return;
    const name = poolContainerName(poolId);
    const info = await inspectOrNull(this.docker.getContainer(name));
    const owner = info?.Config.Labels[LABELS.installation];
    if (owner !== undefined && owner !== (await this.workspaces.installationId())) {
      throw new AppError("CONFLICT", `container ${name} belongs to another Berth installation (${owner})`);
    }
    if (info) await removeContainer(this.docker, name);
    await deleteHostTree(this.paths.folder(poolId));
    await this.paths.removeRuntime(poolId);
  }

  /** Ids of this installation's pool containers that carry no binding. */
  async listIdle(): Promise<string[]> {
    const ids: string[] = [];
    for (const { id, binding } of await this.listMachines()) {
      if (binding === "none") ids.push(id);
    }
    return ids;
  }

  /**
   * Every pool container of this installation with its binding: "none" (idle), the record, or
   * "unreadable" (bound, owner unknown: neither idle nor a workspace's, so reconcile never touches it).
   */
  async listMachines(): Promise<
    Array<{ id: string; name: string; binding: PoolBinding | "none" | "unreadable" }>
  > {
    const installation = await this.workspaces.installationId();
    const containers = await this.docker.listContainers({
      all: true,
      filters: { label: [`${LABELS.managed}=true`, `${LABELS.installation}=${installation}`, LABELS.pool] },
    });
    const machines = [];
    for (const container of containers) {
      const id = ZPoolId.safeParse(container.Labels[LABELS.pool]);
      if (!id.success) continue;
      const name = (container.Names[0] ?? container.Id).replace(/^\//, "");
      const bound = await this.paths.isBound(id.data);
      const record = bound ? await this.paths.readBinding(id.data) : null;
      machines.push({
        id: id.data,
        name,
        binding: !bound ? ("none" as const) : (record ?? ("unreadable" as const)),
      });
    }
    return machines;
  }
}

function parsePoolId(id: string): string {
  const parsed = ZPoolId.safeParse(id);
  if (!parsed.success) throw new AppError("BAD_REQUEST", `not a pool machine id: ${JSON.stringify(id)}`);
  return parsed.data;
}

function conflict(id: string, reason: string): AppError {
  return new AppError("CONFLICT", `pool machine ${id} cannot be bound: ${reason}`, {
    details: { pool: id },
  });
}

/** True when `folder` exists and is not an empty directory (a file there counts as data too). */
async function hasEntries(folder: string): Promise<boolean> {
  const stat = await fs.lstat(folder).catch(() => null);
  if (!stat) return false;
  if (!stat.isDirectory()) return true;
  return (await fs.readdir(folder)).length > 0;
}
