import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import type Docker from "dockerode";
import { AppError } from "@/server/shared/errors";
import type { BackendHandle, WorkspaceResources } from "@/server/workspace/drivers/driver";
import { deleteHostTree } from "@/server/workspace/drivers/host-folder/host-tree-deleter";
import { workspaceVanished } from "@/server/workspace/drivers/vanished";
import { LABELS, type DockerWorkspaceRef } from "./docker-config";
import type {
  DockerContainers,
  DockerCreateEvent,
  DockerWorkspaceHandle,
  DockerWorkspaceRequest,
} from "./docker-containers";
import { reattachDockerGateway, startDockerGateway, type RunningGateway } from "./docker-gateway";
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

  constructor(private readonly workspaces: DockerContainers) {
    this.paths = new PoolPaths(workspaces.config);
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
    await this.removeRuntime(poolId);
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

  /**
   * The handle of the pool machine bound to `ref`, when its binding names `ref` and its container is
   * there; null otherwise (the workspace's own container `berth-ws-…` is then used on the same folder).
   * With `reuseToken`, a healthy gateway on file is reused without a single Docker call.
   */
  async openBound(
    id: string,
    ref: DockerWorkspaceRef,
    request: Pick<DockerWorkspaceRequest, "provisionedBefore" | "reuseToken" | "onProgress">,
  ): Promise<DockerWorkspaceHandle | null> {
    const poolId = ZPoolId.safeParse(id);
    const binding = poolId.success ? await this.paths.readBinding(poolId.data) : null;
    if (!poolId.success || !binding || !bindsTo(binding, ref)) return null;
    const hostWorkdir = this.workspaces.hostWorkdirOf(ref);
    const workdirIdentity = await hostFolderIdentity(hostWorkdir);
    if (workdirIdentity !== binding.workdirIdentity) {
      // The folder was deleted or replaced outside Berth: the machine runs on data that is gone.
      if (request.provisionedBefore) throw workspaceVanished();
      return null;
    }
    const name = poolContainerName(poolId.data);
    const hostRuntimeDir = this.paths.runtimeDir(poolId.data);
    const { config } = this.workspaces;
    const placed = { ref, name, hostWorkdir, workdirIdentity, hostRuntimeDir, pool: poolId.data };
    const running = request.reuseToken ? await reattachDockerGateway(config, hostRuntimeDir) : null;
    if (running) {
      // The gateway answered with its nonce on this machine's own socket: its container runs.
      const container = this.docker.getContainer(name);
      return this.workspaces.machineHandle({ ...placed, container, gateway: running, reattached: true });
    }
    const started = await this.startBound(name, binding);
    if (!started) return null;
    const { onProgress } = request;
    onProgress?.({ type: "container", state: "reattached", name });
    onProgress?.({ type: "gateway", state: "starting" });
    const gateway: RunningGateway = await startDockerGateway(
      started.container,
      config,
      {
        hostRuntimeDir,
        hostWorkdir,
        containerStartedAt: started.startedAt,
        hostSetsOwners: this.workspaces.hostSetsOwners,
      },
      {
        reuseToken: request.reuseToken ?? false,
        onReady: () => onProgress?.({ type: "gateway", state: "ready" }),
      },
    );
    return this.workspaces.machineHandle({
      ...placed,
      container: started.container,
      gateway,
      reattached: true,
    });
  }

  /** Starts the bound machine's container (stopped by `stop`); null when it is gone or not the machine. */
  private async startBound(
    name: string,
    binding: PoolBinding,
  ): Promise<{ container: Docker.Container; startedAt: number } | null> {
    const container = this.docker.getContainer(name);
    const info = await inspectOrNull(container);
    if (!info) return null;
    const labels = info.Config.Labels;
    if (
      labels[LABELS.installation] !== (await this.workspaces.installationId()) ||
      labels[LABELS.pool] !== binding.poolId ||
      labels[LABELS.workdir] !== binding.workdirIdentity
    ) {
      return null;
    }
    if (info.State.Running && !info.State.Paused) {
      return { container, startedAt: Date.parse(info.State.StartedAt) };
    }
    // The running machine kept its folder through the rename (its mount holds the inode), but a start
    // resolves the bind's source PATH again: for that moment the pool path links to the workspace's folder.
    if (!info.State.Paused && !(await this.linkPoolPath(binding))) return null;
    try {
      if (info.State.Paused) await container.unpause();
      else await container.start();
    } catch (error) {
      if (statusOf(error) !== 304) throw engineError(error, "start the workspace container");
    } finally {
      // Mounted now (or not started): nothing of the workspace stays reachable under the pool's path.
      await this.unlinkPoolPath(binding.poolId);
    }
    return { container, startedAt: Date.now() };
  }

  /**
   * Makes the pool path (the container's bind source) lead to the bound workspace's folder before the
   * container starts again: Docker would otherwise mount the path as it finds it (and create an empty
   * folder there when it is missing). False when it cannot be made to: the workspace then gets its own
   * container on its folder. A folder found there (an earlier start's) is removed only when empty.
   */
  private async linkPoolPath(binding: PoolBinding): Promise<boolean> {
    const poolPath = this.paths.folder(binding.poolId);
    if ((await hostFolderIdentity(poolPath).catch(() => null)) === binding.workdirIdentity) return true;
    const found = await fs.lstat(poolPath).catch(() => null);
    // A dangling or wrong link, or the empty folder an earlier start made: replaced. Anything else stays.
    if (found?.isDirectory()) await fs.rmdir(poolPath).catch(() => undefined);
    else if (found?.isSymbolicLink()) await fs.unlink(poolPath).catch(() => undefined);
    const target = this.workspaces.hostWorkdirOf(binding);
    await fs.symlink(target, poolPath).catch(() => undefined);
    return (await hostFolderIdentity(poolPath).catch(() => null)) === binding.workdirIdentity;
  }

  private async unlinkPoolPath(id: string): Promise<void> {
    const poolPath = this.paths.folder(id);
    if ((await fs.lstat(poolPath).catch(() => null))?.isSymbolicLink()) await fs.unlink(poolPath);
  }

  /** The binding of the machine `id` when it names `ref` (what stop, usage and exists act on). */
  async bindingFor(id: string | null, ref: DockerWorkspaceRef): Promise<PoolBinding | null> {
    if (id === null || !ZPoolId.safeParse(id).success) return null;
    const binding = await this.paths.readBinding(id);
    return binding && bindsTo(binding, ref) ? binding : null;
  }

  /**
   * Deletes a machine bound to `ref` with the workspace's data (purge, reap): files from inside the
   * container, the container, the workspace folder, whatever is left of the pool folder (a rename that
   * never happened), its runtime dir, and last the binding record, so a purge stopped half-way is still
   * listed as the workspace's and finished by the next one.
   */
  async purgeBound(id: string, ref: DockerWorkspaceRef): Promise<string[]> {
    const binding = await this.bindingFor(id, ref);
    if (!binding) return [];
    const name = poolContainerName(binding.poolId);
    const hadContainer = (await inspectOrNull(this.docker.getContainer(name))) !== null;
    const hostWorkdir = this.workspaces.hostWorkdirOf(ref);
    const hadData = (await hostFolderIdentity(hostWorkdir)) !== null;
    await this.workspaces.removeMachine({
      name,
      hostWorkdir,
      hostRuntimeDir: this.paths.runtimeDir(binding.poolId),
    });
    await deleteHostTree(this.paths.folder(binding.poolId));
    await this.removeRuntime(binding.poolId);
    return [...(hadContainer ? [`container:${name}`] : []), ...(hadData ? [`directory:${hostWorkdir}`] : [])];
  }

  /**
   * Lets go of a bound machine whose workspace now runs in its own container (its folder vanished, or its
   * container is gone): removes the pool container and its runtime, never the workspace's folder.
   */
  async release(id: string, ref: DockerWorkspaceRef): Promise<void> {
    const binding = await this.bindingFor(id, ref);
    if (!binding) return;
    await removeContainer(this.docker, poolContainerName(binding.poolId));
    await deleteHostTree(this.paths.folder(binding.poolId));
    await this.removeRuntime(binding.poolId);
  }

  private async removeRuntime(id: string): Promise<void> {
    await fs.rm(this.paths.runtimeDir(id), { recursive: true, force: true });
    await fs.rm(this.paths.credentialsFile(id), { force: true });
    await this.paths.removeBinding(id);
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
