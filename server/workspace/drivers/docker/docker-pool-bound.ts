import fs from "node:fs/promises";
import type Docker from "dockerode";
import { deleteHostTree } from "@/server/workspace/drivers/host-folder/host-tree-deleter";
import { workspaceVanished } from "@/server/workspace/drivers/vanished";
import { LABELS, type DockerWorkspaceRef } from "./docker-config";
import type {
  DockerMachineHost,
  DockerWorkspaceHandle,
  DockerWorkspaceRequest,
} from "./docker-workspace-types";
import { reattachDockerGateway, startDockerGateway, type RunningGateway } from "./docker-gateway";
import { bindsTo, poolContainerName, ZPoolId, type PoolBinding, type PoolPaths } from "./docker-pool-layout";
import { hostFolderIdentity } from "./host-folder";
import { engineError, inspectOrNull, removeContainer, statusOf } from "./workspace-container";

/**
 * Warm pool machines once bound to a workspace (docker-warm-pool.ts binds them): the container
 * `berth-pool-<id>` on the workspace's folder, found from the stored handle and the binding record, for
 * every process' attach and the workers' restart, purge and release.
 */
export class BoundPoolMachines {
  constructor(
    private readonly workspaces: DockerMachineHost,
    private readonly paths: PoolPaths,
  ) {}

  private get docker(): Docker {
    return this.workspaces.docker;
  }

  /**
   * The handle of the pool machine bound to `ref`, when its binding names `ref` and its container is
   * there; null otherwise (the workspace's own container `berth-ws-…` is then used on the same folder).
   * With `reuseToken`, a healthy gateway on file is reused without a single Docker call.
   */
  async open(
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
    await this.paths.removeRuntime(binding.poolId);
    return [...(hadContainer ? [`container:${name}`] : []), ...(hadData ? [`directory:${hostWorkdir}`] : [])];
  }

  /**
   * A provision of a workspace on a machine made under another pool key (the image or the config changed
   * since) lets go of it, as a workspace's own container is replaced when its config hash changes: the
   * workspace then gets its own container on the same folder. True when it did.
   */
  async retireIfStale(id: string, ref: DockerWorkspaceRef, currentKey: string): Promise<boolean> {
    const binding = await this.bindingFor(id, ref);
    if (!binding) return false;
    const info = await inspectOrNull(this.docker.getContainer(poolContainerName(binding.poolId)));
    if (!info || info.Config.Labels[LABELS.poolKey] === currentKey) return false;
    await this.release(id, ref);
    return true;
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
    await this.paths.removeRuntime(binding.poolId);
  }
}
