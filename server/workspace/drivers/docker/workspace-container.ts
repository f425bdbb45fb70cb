import type { WorkspaceResources } from "@/server/workspace/drivers/driver";
import { createHash } from "node:crypto";
import type Docker from "dockerode";
import { AppError, isAppError } from "@/server/shared/errors";
import { workspaceVanished } from "@/server/workspace/drivers/vanished";
import {
  CONTAINER_PATHS,
  containerName,
  LABELS,
  type DockerWorkspaceRef,
  type TDockerDriverConfig,
} from "./docker-config";

/** The workspace plus the agent that created it; all written as labels so operators can find containers. */
export type ContainerSpec = DockerWorkspaceRef & {
  agentId: string;
  /** This installation's id, a label: reconcile lists and reaps only containers that carry its own. */
  installation: string;
  image: string;
  hostWorkdir: string;
  /** The host folder's `<dev>:<inode>` (host-folder.ts): a container made for another folder is not reused. */
  workdirIdentity: string;
  /**
   * The workspace was provisioned before (an attach with the engine's stored handle): a container made for
   * another folder means the workspace's folder vanished (workspaceVanished), not a container to replace.
   */
  provisionedBefore?: boolean;
  hostRuntimeDir: string;
  resources?: WorkspaceResources;
};

/** The PATH, HOME and locale every command starts from. */
export function containerEnv(config: TDockerDriverConfig): Record<string, string> {
  return {
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    HOME: CONTAINER_PATHS.home,
    LANG: "C.UTF-8",
    ...config.env,
  };
}

/**
 * What every container Berth runs a workspace in has, whoever it is for (a workspace's own or a warm pool's):
 * image, entrypoint, user, env, limits, network, the two bind mounts. No name and no labels: those carry the
 * identity. The warm pool's key hashes this (with placeholder paths), so a config change makes a new pool.
 */
export function machineCreateOptions(
  config: TDockerDriverConfig,
  mounts: { image: string; hostWorkdir: string; hostRuntimeDir: string },
): Docker.ContainerCreateOptions {
  return {
    Image: mounts.image,
    // tini reaps the orphans killed commands leave behind; without it PID 1 (sleep) would not.
    Entrypoint: [
      "/bin/sh",
      "-c",
      'if command -v tini >/dev/null; then exec tini -s -- "$@"; else exec "$@"; fi',
      "init",
    ],
    Cmd: ["sleep", "infinity"],
    // PID 1 runs as root ON PURPOSE: with no-new-privileges, an exec only keeps capabilities when the
    // container's user is root, and Berth's own chores (chown of a fresh workdir, the gateway) need them.
    // Agent commands are always exec'd as the workspace user, with no capabilities at all.
    User: "0:0",
    WorkingDir: CONTAINER_PATHS.workdir,
    Env: Object.entries(containerEnv(config)).map(([key, value]) => `${key}=${value}`),
    HostConfig: {
      Binds: [
        `${mounts.hostWorkdir}:${CONTAINER_PATHS.workdir}:rw`,
        `${mounts.hostRuntimeDir}:${CONTAINER_PATHS.runtimeDir}:rw`,
      ],
      NetworkMode: config.networkMode,
      NanoCpus: Math.round(config.cpus * 1e9),
      Memory: config.memoryBytes,
      MemorySwap: config.memoryBytes,
      PidsLimit: config.pidsLimit,
      SecurityOpt: ["no-new-privileges"],
      CapDrop: ["NET_RAW", "MKNOD", "AUDIT_WRITE", "SYS_CHROOT"],
      RestartPolicy: { Name: "no" },
      Init: false,
    },
  };
}

/**
 * The container's create options. Their hash is stored as a label: when the config or image changes, the
 * old container is replaced (its data lives in the bind mount, so nothing is lost).
 */
function containerCreateOptions(
  config: TDockerDriverConfig,
  spec: ContainerSpec,
): Docker.ContainerCreateOptions {
  const machine = machineCreateOptions(config, spec);
  // Key order as before the warm pool split it out: the hash of existing containers stays the same.
  const options: Docker.ContainerCreateOptions = {
    name: containerName(spec),
    Image: machine.Image,
    Entrypoint: machine.Entrypoint,
    Cmd: machine.Cmd,
    User: machine.User,
    WorkingDir: machine.WorkingDir,
    Env: machine.Env,
    Labels: {
      [LABELS.managed]: "true",
      [LABELS.installation]: spec.installation,
      [LABELS.workspace]: spec.workspaceId,
      [LABELS.tenant]: spec.tenantId,
      [LABELS.user]: spec.userId,
      [LABELS.agent]: spec.agentId,
    },
    HostConfig: machine.HostConfig,
  };
  const hash = createHash("sha256").update(JSON.stringify(options)).digest("hex").slice(0, 16);
  // The folder's identity is not hashed: a container on another folder is replaced, or refused (see below).
  options.Labels = { ...options.Labels, [LABELS.configHash]: hash, [LABELS.workdir]: spec.workdirIdentity };
  // The tenant's per-workspace quota lowers the installation's limits, never raises them. Applied after the
  // hash: an API process attaching (which knows no quotas) must find the worker's container, not replace it.
  const limits = quotaLimits(config, spec.resources);
  if (options.HostConfig) options.HostConfig = { ...options.HostConfig, ...limits };
  return options;
}

/**
 * The limits a tenant's per-workspace quota lowers (never raises) below the installation's, as HostConfig
 * fields (also what `docker update` takes: the warm pool applies them to a machine it binds).
 */
export function quotaLimits(
  config: TDockerDriverConfig,
  resources: WorkspaceResources | undefined,
): { NanoCpus?: number; Memory?: number; MemorySwap?: number } {
  const { cpus, memoryBytes } = resources ?? {};
  return {
    ...(cpus !== undefined && cpus < config.cpus ? { NanoCpus: Math.round(cpus * 1e9) } : {}),
    ...(memoryBytes !== undefined && memoryBytes < config.memoryBytes
      ? { Memory: memoryBytes, MemorySwap: memoryBytes }
      : {}),
  };
}

/** What to do with a container found under the wanted name: use it as it is, or replace it. */
type ExistingContainerVerdict = "use" | "replace";

/**
 * Create-or-get for the workspace's container, then make sure it runs. The deterministic name makes
 * this idempotent across process restarts (reattach) and races (a 409 on create means another process
 * created it first: use that one). A container that cannot start (dead, removed mount) is replaced.
 * `startedAt` (epoch ms) is when the container's current run began: no gateway launched before it runs.
 */
export async function ensureRunningContainer(
  docker: Docker,
  config: TDockerDriverConfig,
  spec: ContainerSpec,
): Promise<{ container: Docker.Container; created: boolean; startedAt: number }> {
  const options = containerCreateOptions(config, spec);
  const wantedHash = options.Labels?.[LABELS.configHash];
  return ensureRunning(docker, options, spec.installation, (existing) => {
    // A container created before installations were labelled (no label) has another config hash, so it is
    // replaced by one carrying this installation's label; its data lives in the bind mount and stays.
    if (existing.Config.Labels[LABELS.configHash] !== wantedHash) return "replace";
    // Made for another host folder: that one was deleted (the container still runs on it) or replaced
    // outside Berth. Attaching says the files vanished; provisioning gives the new folder a new container.
    // One made before the label existed is replaced too: its data is in the bind mount, which stays.
    const recordedWorkdir = existing.Config.Labels[LABELS.workdir];
    if (recordedWorkdir !== spec.workdirIdentity) {
      if (spec.provisionedBefore && recordedWorkdir !== undefined) throw workspaceVanished();
      return "replace";
    }
    return "use";
  });
}

/**
 * Create-or-get + start of the container `options.name` (a workspace's or a warm pool's): `judge` says
 * whether one found under the name is used or replaced; one of another installation is never touched.
 */
export async function ensureRunning(
  docker: Docker,
  options: Docker.ContainerCreateOptions,
  installation: string,
  judge: (existing: Docker.ContainerInspectInfo) => ExistingContainerVerdict,
): Promise<{ container: Docker.Container; created: boolean; startedAt: number }> {
  const name = options.name!;
  for (let attempt = 0; attempt < 3; attempt++) {
    const existing = await inspectOrNull(docker.getContainer(name));
    const owner = existing?.Config.Labels[LABELS.installation];
    if (owner && owner !== installation) {
      // Another installation's container under this name: never replaced or used from here.
      throw new AppError("CONFLICT", `container ${name} belongs to another Berth installation (${owner})`, {
        userMessage:
          "This workspace's container belongs to another Berth installation on the same Docker engine.",
        details: { container: name },
      });
    }
    if (existing && judge(existing) === "replace") {
      await removeContainer(docker, name);
      continue;
    }
    let container: Docker.Container;
    let created = false;
    if (existing) {
      container = docker.getContainer(existing.Id);
      if (existing.State.Running && !existing.State.Paused) {
        return { container, created, startedAt: Date.parse(existing.State.StartedAt) };
      }
      if (existing.State.Paused) await container.unpause();
    } else {
      try {
        container = await docker.createContainer(options);
        created = true;
      } catch (error) {
        if (statusOf(error) === 409) continue; // created concurrently: inspect it next round
        throw engineError(error, "create the workspace container");
      }
    }
    try {
      await container.start();
    } catch (error) {
      // 304: already started by a concurrent caller. Anything else: replace the container.
      if (statusOf(error) !== 304) {
        await removeContainer(docker, name);
        if (attempt === 2) throw engineError(error, "start the workspace container");
        continue;
      }
    }
    return { container, created, startedAt: Date.now() };
  }
  throw new AppError("UNAVAILABLE", `Could not get workspace container ${name} running`);
}

export async function inspectOrNull(
  container: Docker.Container,
): Promise<Docker.ContainerInspectInfo | null> {
  try {
    return await container.inspect();
  } catch (error) {
    if (statusOf(error) === 404) return null;
    throw engineError(error, "inspect the workspace container");
  }
}

/** Stops without removing: the container and its data stay for a later reattach. */
export async function stopContainer(docker: Docker, name: string, timeoutSeconds: number): Promise<void> {
  try {
    await docker.getContainer(name).stop({ t: timeoutSeconds });
  } catch (error) {
    const status = statusOf(error);
    if (status !== 304 && status !== 404) throw engineError(error, "stop the workspace container");
  }
}

export async function removeContainer(docker: Docker, name: string): Promise<void> {
  try {
    await docker.getContainer(name).remove({ force: true, v: true });
  } catch (error) {
    const status = statusOf(error);
    // 404: already gone. 409: a removal is already in progress.
    if (status !== 404 && status !== 409) throw engineError(error, "remove the workspace container");
  }
}

export function statusOf(error: unknown): number | undefined {
  return (error as { statusCode?: number }).statusCode;
}

export function engineError(error: unknown, action: string): AppError {
  if (isAppError(error)) return error;
  return new AppError("UNAVAILABLE", `Docker could not ${action}: ${String(error)}`, {
    cause: error,
    userMessage: `Docker could not ${action}`,
    details: { statusCode: statusOf(error) },
  });
}
