import fs from "node:fs/promises";
import { DockerAttacher } from "@/server/workspace/drivers/docker/docker-attacher";
import {
  DockerContainers,
  type DockerContainersDeps,
} from "@/server/workspace/drivers/docker/docker-containers";
import {
  containerName,
  LABELS,
  type DockerWorkspaceRef,
  type TDockerDriverConfigInput,
} from "@/server/workspace/drivers/docker/docker-config";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { hostFolderIdentity } from "@/server/workspace/drivers/docker/host-folder";
import { directoryBytes, type MachineUsage } from "@/server/workspace/drivers/machine-usage";
import type { DockerCreateEvent } from "@/server/workspace/drivers/docker/docker-containers";
import type { DockerWarmPool } from "@/server/workspace/drivers/docker/docker-warm-pool";
import {
  poolContainerName,
  pooledHandle,
  poolIdOf,
} from "@/server/workspace/drivers/docker/docker-pool-layout";
import { stopContainer } from "@/server/workspace/drivers/docker/workspace-container";
import type {
  BackendHandle,
  CreateOptions,
  MachineResource,
  CreateProgress,
} from "@/server/workspace/drivers/driver";

/**
 * One container per workspace (server/workspace/drivers/docker). The workers create, stop and purge;
 * every process (workers and API alike) attaches through `attacher`, which REUSES the running gateway and
 * its token (a 0600 file next to the runtime dir) instead of restarting it: a restart with a fresh token
 * would cut off every other process already attached to the same container.
 */
export class DockerMachines {
  readonly attacher: DockerAttacher;
  readonly workspaces: DockerContainers;

  constructor(config: TDockerDriverConfigInput, deps: DockerContainersDeps = {}) {
    this.workspaces = new DockerContainers(config, deps);
    this.attacher = new DockerAttacher(this.workspaces, { reuseToken: true });
  }

  async create(spec: WorkspaceSpec, options: CreateOptions = {}): Promise<BackendHandle> {
    // create-or-get + start + gateway healthy. The handle is dropped, NOT closed: closing stops the container.
    const { onProgress } = options;
    const stored = poolIdOf(spec.handle);
    const stale =
      stored !== null &&
      (await this.warmPool.bound.retireIfStale(stored, refOf(spec), await this.warmPool.key()));
    const pool = stale ? null : stored;
    const handle = await this.workspaces.open({
      ...refOf(spec),
      agentId: spec.agentId,
      reuseToken: true,
      ...(spec.resources ? { resources: spec.resources } : {}),
      ...(pool === null ? {} : { pool }),
      onProgress: onProgress && ((event) => onProgress(progressOf(event))),
    });
    // A provisioned workspace is a working one: the gateway must have started (else this fails with its log).
    await handle.gateway.ready;
    // A pooled workspace whose pool container is gone (or whose folder vanished) now has its own container:
    // what is left of the pool machine goes, its folder (the workspace's) stays.
    if (pool !== null && handle.pool === undefined)
      await this.workspaces.warmPool.bound.release(pool, refOf(spec));
    // The container is named by the ids (or is the bound pool machine's); the handle records it for
    // operators, for reconcile and, for a pool machine, for every later operation (poolIdOf).
    return handle.pool === undefined ? { container: handle.containerName } : pooledHandle(handle.pool);
  }

  /** The pool machine warm pools keep: made ahead, bound on a first use (docker-warm-pool.ts). */
  get warmPool(): DockerWarmPool {
    return this.workspaces.warmPool;
  }

  async createIdleMachine(id: string, options: CreateOptions = {}): Promise<BackendHandle> {
    const { onProgress } = options;
    return this.warmPool.createIdleMachine(id, onProgress && ((event) => onProgress(progressOf(event))));
  }

  bindIdleMachine(id: string, handle: BackendHandle, spec: WorkspaceSpec): Promise<BackendHandle> {
    return this.warmPool.bind(id, handle, refOf(spec), spec.resources);
  }

  pruneImages(options: { dryRun: boolean }): Promise<string[]> {
    return this.workspaces.pruneImages(options);
  }

  async stop(spec: WorkspaceSpec): Promise<void> {
    const ref = refOf(spec);
    const bound = await this.warmPool.bound.bindingFor(poolIdOf(spec.handle), ref);
    if (bound) await stopContainer(this.workspaces.docker, poolContainerName(bound.poolId), this.stopTimeout);
    await this.workspaces.stop(ref);
  }

  /**
   * The workspace's own container and folder, and every pool machine bound to it: the one its handle
   * names and any whose handle was never stored (a bind that crashed before the record was written).
   */
  async purge(spec: Pick<WorkspaceSpec, keyof DockerWorkspaceRef | "handle">): Promise<string[]> {
    const ref = refOf(spec);
    const named = poolIdOf(spec.handle);
    const pools = new Set([...(named === null ? [] : [named]), ...(await this.warmPool.paths.boundTo(ref))]);
    const deleted: string[] = [];
    for (const pool of pools) deleted.push(...(await this.warmPool.bound.purgeBound(pool, ref)));
    const hadContainer = (await this.containerOf(ref)) !== null;
    const workdir = this.workspaces.hostWorkdirOf(ref);
    const hadData = await pathExists(workdir);
    await this.workspaces.purge(ref);
    deleted.push(
      ...(hadContainer ? [`container:${containerName(ref)}`] : []),
      ...(hadData ? [`directory:${workdir}`] : []),
    );
    return [...new Set(deleted)];
  }

  /**
   * The container's stats (one read, no stream): CPU time, memory in use less the reclaimable page cache
   * (what `docker stats` shows), its process count; disk is the bind-mounted work folder on the host.
   * Null when the container is not running.
   */
  async usage(spec: WorkspaceSpec): Promise<MachineUsage | null> {
    const ref = refOf(spec);
    const container = this.workspaces.docker.getContainer(await this.containerNameOf(spec));
    const info = await container.inspect().catch(() => null);
    if (!info?.State.Running) return null;
    const stats = (await container.stats({ stream: false, "one-shot": true })) as DockerStats;
    const memory = stats.memory_stats;
    const cache =
      memory?.stats?.inactive_file ?? memory?.stats?.total_inactive_file ?? memory?.stats?.cache ?? 0;
    return {
      cpuSeconds: stats.cpu_stats?.cpu_usage?.total_usage
        ? stats.cpu_stats.cpu_usage.total_usage / 1e9
        : null,
      memoryBytes: typeof memory?.usage === "number" ? Math.max(memory.usage - cache, 0) : null,
      diskBytes: await directoryBytes(this.workspaces.hostWorkdirOf(ref)),
      processes: typeof stats.pids_stats?.current === "number" ? stats.pids_stats.current : null,
    };
  }

  /**
   * The data is the workspace: its host folder must be there, and be the one the container was created on
   * (a folder deleted outside Berth, even one recreated under the same path, lost the data; the workers
   * then record a data_lost event and provision a new container on a new folder). A missing container is
   * recreated from the folder by the next provision.
   */
  async exists(spec: WorkspaceSpec): Promise<boolean> {
    const ref = refOf(spec);
    const identity = await hostFolderIdentity(this.workspaces.hostWorkdirOf(ref));
    if (identity === null) return false;
    const bound = await this.warmPool.bound.bindingFor(poolIdOf(spec.handle), ref);
    if (bound) return bound.workdirIdentity === identity;
    const recorded = (await this.containerOf(ref))?.Config.Labels[LABELS.workdir];
    return recorded === undefined || recorded === identity;
  }

  /**
   * Containers carrying Berth's managed label AND this installation's id (data folders without a container
   * are not listed). Another installation's containers on the same engine are never listed, nor are those
   * created before installations were labelled: their owner is unknown, so none reaps them (this
   * installation's own are relabelled when they next provision; see ensureRunningContainer).
   */
  async listResources(): Promise<MachineResource[]> {
    const installation = await this.workspaces.installationId();
    const containers = await this.workspaces.docker.listContainers({
      all: true,
      filters: { label: [`${LABELS.managed}=true`, `${LABELS.installation}=${installation}`] },
    });
    const own = containers
      .filter((container) => container.Labels[LABELS.pool] === undefined)
      .map((container) => ({
        workspaceId: container.Labels[LABELS.workspace] ?? null,
        tenantId: container.Labels[LABELS.tenant] ?? null,
        locator: (container.Names[0] ?? container.Id).replace(/^\//, ""),
      }));
    // Pool machines: an idle one is the pool's (listIdleMachines), one bound to a workspace is that
    // workspace's (its binding record), one whose binding cannot be read is nobody's to reap.
    const bound = (await this.warmPool.listMachines()).flatMap(({ name, binding }) =>
      typeof binding === "string"
        ? []
        : [{ workspaceId: binding.workspaceId, tenantId: binding.tenantId, locator: name }],
    );
    return [...own, ...bound];
  }

  /** Purges an orphan container and its data; the owner comes from the container's own labels. */
  async reap(resource: MachineResource): Promise<void> {
    const info = await this.workspaces.docker
      .getContainer(resource.locator)
      .inspect()
      .catch(() => null);
    if (!info) return;
    const labels = info.Config.Labels;
    if (labels[LABELS.pool] !== undefined) return this.reapPoolMachine(resource, labels);
    const ref = {
      tenantId: labels[LABELS.tenant],
      userId: labels[LABELS.user],
      workspaceId: labels[LABELS.workspace],
    };
    if (labels[LABELS.managed] !== "true" || !ref.tenantId || !ref.userId || !ref.workspaceId) {
      throw new Error(`refusing to reap ${resource.locator}: not a Berth workspace container`);
    }
    if (labels[LABELS.installation] !== (await this.workspaces.installationId())) {
      throw new Error(`refusing to reap ${resource.locator}: not this installation's container`);
    }
    await this.workspaces.purge({ tenantId: ref.tenantId, userId: ref.userId, workspaceId: ref.workspaceId });
  }

  /** A bound pool machine is reaped with its workspace (named by its binding); an idle one is the pool's. */
  private async reapPoolMachine(resource: MachineResource, labels: Record<string, string>): Promise<void> {
    const pool = labels[LABELS.pool]!;
    if (
      labels[LABELS.managed] !== "true" ||
      labels[LABELS.installation] !== (await this.workspaces.installationId())
    ) {
      throw new Error(`refusing to reap ${resource.locator}: not this installation's container`);
    }
    const binding = await this.warmPool.paths.readBinding(pool);
    if (!binding) throw new Error(`refusing to reap ${resource.locator}: an unbound pool machine`);
    const { tenantId, userId, workspaceId } = binding;
    await this.purge({ tenantId, userId, workspaceId, handle: pooledHandle(pool) });
  }

  private async containerNameOf(spec: WorkspaceSpec): Promise<string> {
    const bound = await this.warmPool.bound.bindingFor(poolIdOf(spec.handle), refOf(spec));
    return bound ? poolContainerName(bound.poolId) : containerName(refOf(spec));
  }

  private get stopTimeout(): number {
    return this.workspaces.config.stopTimeoutSeconds;
  }

  private containerOf(ref: DockerWorkspaceRef) {
    return this.workspaces.docker
      .getContainer(containerName(ref))
      .inspect()
      .catch(() => null);
  }
}

/** The fields of the engine's stats answer read here (cgroup v2 names first, v1's as fallbacks). */
type DockerStats = {
  cpu_stats?: { cpu_usage?: { total_usage?: number } };
  memory_stats?: {
    usage?: number;
    stats?: { inactive_file?: number; total_inactive_file?: number; cache?: number };
  };
  pids_stats?: { current?: number };
};

function refOf(spec: DockerWorkspaceRef): DockerWorkspaceRef {
  return { tenantId: spec.tenantId, userId: spec.userId, workspaceId: spec.workspaceId };
}

async function pathExists(target: string): Promise<boolean> {
  return fs.stat(target).then(
    () => true,
    () => false,
  );
}

function progressOf(event: DockerCreateEvent): CreateProgress {
  switch (event.type) {
    case "image":
      return { step: `image.${event.phase}`, detail: event.message ?? event.tag };
    case "container":
      return { step: `container.${event.state}`, detail: event.name };
    case "gateway":
      return { step: `gateway.${event.state}` };
  }
}
