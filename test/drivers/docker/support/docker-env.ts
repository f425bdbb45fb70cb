import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Docker from "dockerode";
import { describe } from "vitest";
import {
  DockerContainers,
  type DockerWorkspaceHandle,
} from "@/server/workspace/drivers/docker/docker-containers";
import type { WorkspaceDriver } from "@/server/workspace/drivers/driver";
import type { DockerAttacher } from "@/server/workspace/drivers/docker/docker-attacher";
import { DockerMachines } from "@/server/workspace/drivers/docker/docker-machines";
import { dockerDriver } from "@/server/workspace/drivers/docker/driver";
import { dockerDriverOver } from "@/server/workspace/drivers/docker/docker-operations";
import type {
  DockerWorkspaceRef,
  TDockerDriverConfigInput,
} from "@/server/workspace/drivers/docker/docker-config";

/**
 * Decides whether the Docker suites run: engine reachable and base image present → run. Otherwise: in
 * CI (`CI` set) the suite FAILS loudly, because CI is supposed to have started the engine
 * (scripts/docker/ensure-engine.sh) and built the image (scripts/docker/build-base-image.sh); elsewhere
 * it is skipped with the reason printed.
 */
export const SOCKET_PATH = process.env.DOCKER_SOCKET ?? "/var/run/docker.sock";
export const BASE_IMAGE = process.env.BERTH_BASE_IMAGE ?? "berth-base:bookworm";

async function probe(): Promise<string | null> {
  const docker = new Docker({ socketPath: SOCKET_PATH });
  try {
    await docker.ping();
  } catch (error) {
    return `no Docker engine at ${SOCKET_PATH} (${String(error)}); start one with scripts/docker/ensure-engine.sh`;
  }
  try {
    await docker.getImage(BASE_IMAGE).inspect();
  } catch {
    return `base image ${BASE_IMAGE} is missing; build it with scripts/docker/build-base-image.sh`;
  }
  return null;
}

const skipReason = await probe();
if (skipReason && process.env.CI) {
  throw new Error(`[docker tests] CI requires a Docker engine: ${skipReason}`);
}
if (skipReason) console.warn(`[docker tests] SKIPPED: ${skipReason}`);

/** `describe` when the engine is usable, `describe.skip` (with the reason printed above) otherwise. */
export const describeDocker = skipReason ? describe.skip : describe;
export const dockerSkipReason = skipReason;

export function uniqueWorkspaceId(prefix = "t"): string {
  return `${prefix}${randomBytes(6).toString("hex")}`;
}

/**
 * The installation id this test process labels its containers with: its own, so test files sharing the
 * engine (and a developer's Berth) never list or reap each other's containers.
 */
export const TEST_INSTALLATION_ID = `test${randomBytes(6).toString("hex")}`;
export const testInstallationId = () => Promise.resolve(TEST_INSTALLATION_ID);

export const TEST_OWNER = { tenantId: "tenant-test", userId: "user-test", agentId: "agent-test" };

/** A throwaway data root plus a DockerContainers factory; `cleanup` purges every workspace it opened. */
export async function createDockerTestbed(overrides: Partial<TDockerDriverConfigInput> = {}) {
  const dataRoot = await fs.mkdtemp(path.join(os.tmpdir(), "berth-docker-test-"));
  const runtimeRoot = path.join("/tmp", `berth-rt-${randomBytes(3).toString("hex")}`);
  const config: TDockerDriverConfigInput = {
    socketPath: SOCKET_PATH,
    baseImage: BASE_IMAGE,
    dataRoot,
    runtimeRoot,
    memoryBytes: 512 * 1024 * 1024,
    pidsLimit: 256,
    cpus: 1,
    stopTimeoutSeconds: 1,
    ...overrides,
  };
  const opened: DockerWorkspaceRef[] = [];
  const containerSets: DockerContainers[] = [];
  const newContainers = (extra: Partial<TDockerDriverConfigInput> = {}) => {
    const containers = new DockerContainers({ ...config, ...extra }, { installationId: testInstallationId });
    containerSets.push(containers);
    return containers;
  };
  const refFor = (workspaceId = uniqueWorkspaceId()): DockerWorkspaceRef => ({
    tenantId: TEST_OWNER.tenantId,
    userId: TEST_OWNER.userId,
    workspaceId,
  });
  const open = async (
    containers: DockerContainers,
    ref: DockerWorkspaceRef = refFor(),
  ): Promise<DockerWorkspaceHandle> => {
    if (!opened.some((known) => known.workspaceId === ref.workspaceId && known.tenantId === ref.tenantId)) {
      opened.push(ref);
    }
    return containers.open({ ...ref, agentId: TEST_OWNER.agentId });
  };
  /** Marks a workspace opened some other way (e.g. through WorkspaceManager) for cleanup. */
  const track = (ref: DockerWorkspaceRef) => opened.push(ref);
  const cleanup = async () => {
    const containers = containerSets[0] ?? newContainers();
    for (const ref of opened) await containers.purge(ref).catch(() => undefined);
    await fs.rm(dataRoot, { recursive: true, force: true });
    await fs.rm(runtimeRoot, { recursive: true, force: true });
  };
  return {
    config,
    dataRoot,
    newContainers,
    open,
    refFor,
    track,
    cleanup,
    docker: new Docker({ socketPath: SOCKET_PATH }),
  };
}

export { copyPackageClosure } from "./package-closure";

/**
 * A docker driver whose attaching side is `attacher` (a test's own, with its progress events and handles),
 * as a library user without workers holds it: closing a workspace stops its container (the data stays),
 * and the next attach starts it again.
 */
export function libraryDockerDriver(attacher: DockerAttacher): WorkspaceDriver {
  const machines = new DockerMachines(attacher.workspaces.config, { installationId: testInstallationId });
  return {
    ...dockerDriverOver(machines),
    name: dockerDriver.name,
    kind: dockerDriver.kind,
    summary: dockerDriver.summary,
    attach: (spec, options) => attacher.attach(spec, options),
    isAlive: (machine) => attacher.isAlive(machine),
    detach: (machine) => machine.close(),
    connectMcp: (machine) => attacher.connectMcp(machine),
  };
}
