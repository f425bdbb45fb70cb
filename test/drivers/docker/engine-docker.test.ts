import fs from "node:fs/promises";
import { afterAll, beforeAll, expect, it } from "vitest";
import { RecordAttacher } from "@/server/engine/record-attacher";
import { DockerMachines } from "@/server/workspace/drivers/docker/docker-machines";
import { dockerDriver } from "@/server/workspace/drivers/docker/driver";
import { dockerDriverOver } from "@/server/workspace/drivers/docker/docker-operations";
import { driverSetOf } from "@/server/engine/driver-set";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { gatewayCredentialsPath } from "@/server/workspace/drivers/docker/docker-gateway";
import { containerKey, containerName } from "@/server/workspace/drivers/docker/docker-config";
import { WorkspaceManager } from "@/server/workspace/manager/workspace-manager";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";
import {
  BASE_IMAGE,
  createDockerTestbed,
  describeDocker,
  SOCKET_PATH,
  TEST_OWNER,
  testInstallationId,
  uniqueWorkspaceId,
} from "./support/docker-env";

/**
 * BERTH_WORKSPACE_BACKEND=docker through the engine: a WORKER's Docker machines create, an API-side
 * manager (other machines, as in another process) attaches without restarting the gateway, then the
 * worker stops, re-creates (files kept) and purges. Two DockerMachines built from the same env stand in for
 * the two processes; nothing is shared between them but the Docker engine and the host dirs.
 */
describeDocker("engine with the Docker backend: worker provisions, API attaches", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  const spec: WorkspaceSpec = {
    tenantId: TEST_OWNER.tenantId,
    userId: TEST_OWNER.userId,
    agentId: TEST_OWNER.agentId,
    workspaceId: uniqueWorkspaceId("eng"),
    isolation: "per_agent",
  };
  const managers: WorkspaceManager[] = [];

  /** The driver's Docker machines exactly as a process with this environment would build them. */
  const controllerFromEnv = () => {
    const config = loadEngineConfig({
      BERTH_WORKSPACE_BACKEND: "docker",
      BERTH_WORKSPACE_BASEDIR: testbed.dataRoot,
      DOCKER_SOCKET: SOCKET_PATH,
      BERTH_DOCKER_BASE_IMAGE: BASE_IMAGE,
      BERTH_DOCKER_RUNTIME_ROOT: testbed.config.runtimeRoot,
      BERTH_DOCKER_MEMORY_BYTES: String(512 * 1024 * 1024),
    });
    const input = dockerDriver.configSchema.parse(config.drivers?.docker);
    return new DockerMachines(input, { installationId: testInstallationId });
  };
  /** The API process' manager: attach-only (the provisioning gate is the workers' queue, not needed here). */
  const apiManager = (machines: DockerMachines) => {
    const manager = new WorkspaceManager({
      attacher: new RecordAttacher(dockerDriverSet(machines), () =>
        Promise.resolve({ kind: "docker", handle: null }),
      ),
      evictIntervalMs: null,
      livenessIntervalMs: 0,
    });
    managers.push(manager);
    return manager;
  };
  /** The registry's docker driver over these machines. */
  const dockerDriverSet = (machines: DockerMachines) =>
    driverSetOf([
      { ...dockerDriverOver(machines), name: "docker", kind: "docker", summary: dockerDriver.summary },
    ]);
  const credentialsFile = () => gatewayCredentialsPath(`${testbed.config.runtimeRoot}/${containerKey(spec)}`);
  const readNonce = async () =>
    (JSON.parse(await fs.readFile(credentialsFile(), "utf8")) as { instanceNonce: string }).instanceNonce;

  beforeAll(async () => {
    testbed = await createDockerTestbed();
    testbed.track(spec);
  });
  afterAll(async () => {
    for (const manager of managers) await manager.closeAll().catch(() => undefined);
    await testbed?.cleanup();
  });

  it("provision, attach without a token rotation, stop, re-provision keeping files, purge", async () => {
    const worker = controllerFromEnv();
    const handle = await worker.create(spec);
    expect(handle).toEqual({ container: containerName(spec) });
    expect(await worker.exists(spec)).toBe(true);
    // The token is host-only: 0600, outside the runtime dir the container mounts.
    expect((await fs.stat(credentialsFile())).mode & 0o777).toBe(0o600);
    const provisionedNonce = await readNonce();

    // API side: attaches to the SAME gateway instance (no restart, same nonce) and runs commands.
    const api = controllerFromEnv();
    const workspace = await apiManager(api).getWorkspace(spec);
    const apiGateway = api.attacher.handleOf(workspace.machine)!.gateway;
    expect(apiGateway.instanceNonce).toBe(provisionedNonce);
    const run = await workspace.machine.exec(["sh", "-c", "echo kept > note.txt && id -u"]);
    expect(run.stdout.toString().trim()).toBe("1000");

    // A second attacher (another API replica) or a retried provision job must not cut the first one off.
    // Evicting it from that replica's cache only detaches: stopping is the workers' job.
    const replica = apiManager(controllerFromEnv());
    await replica.getWorkspace(spec);
    await replica.closeAll();
    expect(await worker.workspaces.isAlive(spec)).toBe(true);
    await worker.create(spec);
    expect(await readNonce()).toBe(provisionedNonce);
    expect(await apiGateway.client.listMcps({ agentId: spec.agentId, sessionId: "s1" })).toEqual([]);

    // Reconcile sees the container by its labels.
    expect(await worker.listResources()).toContainEqual({
      workspaceId: spec.workspaceId,
      tenantId: spec.tenantId,
      locator: containerName(spec),
    });

    // Stop keeps the data; the container is no longer running.
    await worker.stop(spec);
    expect(await worker.workspaces.isAlive(spec)).toBe(false);
    expect(await worker.exists(spec)).toBe(true);

    // Re-provision (a fresh gateway: the old one died with the container); a new API process sees the file.
    await worker.create(spec);
    expect(await readNonce()).not.toBe(provisionedNonce);
    const again = await apiManager(controllerFromEnv()).getWorkspace(spec);
    const cat = await again.machine.exec(["cat", "note.txt"]);
    expect(cat.stdout.toString()).toBe("kept\n");

    // Purge deletes container, data and the token file.
    const deleted = await worker.purge(spec);
    expect(deleted).toEqual([
      `container:${containerName(spec)}`,
      `directory:${worker.workspaces.hostWorkdirOf(spec)}`,
    ]);
    expect(await worker.exists(spec)).toBe(false);
    await expect(fs.stat(credentialsFile())).rejects.toMatchObject({ code: "ENOENT" });
  });
});
