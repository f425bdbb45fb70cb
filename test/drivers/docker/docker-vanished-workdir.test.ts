import fs from "node:fs/promises";
import { afterAll, beforeAll, expect, it } from "vitest";
import { RecordAttacher, type EnsureProvisioned } from "@/server/engine/record-attacher";
import { createDriverSet, driverSetOf } from "@/server/engine/driver-set";
import { loadEngineConfig } from "@/server/engine/engine-config";
import type { BackendHandle, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { WorkspaceManager } from "@/server/workspace/manager/workspace-manager";
import type { Workspace } from "@/server/workspace/workspace";
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
 * A Docker workspace whose host folder was deleted outside Berth (issue: robustness). Before, the container
 * kept running on the deleted folder and the workspace stayed usable-looking: Bash answered Docker's raw
 * "possible container breakout detected", files.list an empty success, Write failed. Now, like the local
 * backends: every operation says plainly that the files are gone (CONFLICT, workspace_vanished), liveness
 * and `machine.exists` turn false (so the workers record a data_lost event), and the next use provisions a
 * new container on a new folder. A folder recreated under the same path by someone else is not the data.
 */
describeDocker("a Docker workspace whose host folder was deleted", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  const spec: WorkspaceSpec = {
    tenantId: TEST_OWNER.tenantId,
    userId: TEST_OWNER.userId,
    agentId: TEST_OWNER.agentId,
    workspaceId: uniqueWorkspaceId("van"),
    isolation: "per_agent",
  };
  let manager: WorkspaceManager | undefined;

  /** A machine controller exactly as a process with this environment would build it. */
  const controllerFromEnv = () => {
    const config = loadEngineConfig({
      BERTH_WORKSPACE_BACKEND: "docker",
      BERTH_WORKSPACE_BASEDIR: testbed.dataRoot,
      DOCKER_SOCKET: SOCKET_PATH,
      BERTH_DOCKER_BASE_IMAGE: BASE_IMAGE,
      BERTH_DOCKER_RUNTIME_ROOT: testbed.config.runtimeRoot,
      BERTH_DOCKER_MEMORY_BYTES: String(512 * 1024 * 1024),
    });
    return createDriverSet(config, undefined, { installationId: testInstallationId }).default;
  };

  beforeAll(async () => {
    testbed = await createDockerTestbed();
    testbed.track(spec);
  });
  afterAll(async () => {
    await manager?.closeAll().catch(() => undefined);
    await testbed?.cleanup();
  });

  it("says so for Bash, list and Write, turns dead, and the next use provisions a fresh folder", async () => {
    const worker = controllerFromEnv();
    // The provision gate and the workers' job in short (workspace-jobs.service.ts): a READY record is
    // trusted unless attaching found its machine gone; then the job checks `exists`, records the data as
    // lost (a data_lost event) and provisions the machine again.
    const gate = { machineGone: 0, dataLost: 0 };
    let ready: BackendHandle | null = null;
    const ensureProvisioned: EnsureProvisioned = async (wanted, options) => {
      if (ready && !options?.machineGone) return { kind: "docker", handle: ready };
      if (options?.machineGone) gate.machineGone++;
      if (ready && (await worker.exists(wanted))) return { kind: "docker", handle: ready };
      if (ready) gate.dataLost++;
      ready = await worker.create(wanted);
      return { kind: "docker", handle: ready };
    };
    await ensureProvisioned(spec);
    // The API process: its own driver, attaching with the stored handle. No liveness polling here, so
    // the first use after the deletion is the one that notices (as with the local backends).
    const api = controllerFromEnv();
    manager = new WorkspaceManager({
      attacher: new RecordAttacher(driverSetOf([api]), ensureProvisioned),
      evictIntervalMs: null,
      livenessIntervalMs: 3_600_000,
    });
    const workspace = await manager.getWorkspace(spec);
    const tool = toolRunner(workspace);
    expect(await tool("Write", { file_path: "/workspace/notes.txt", content: "kept?" })).toMatchObject({
      isError: false,
    });
    expect((await workspace.machine.list(".")).map((entry) => entry.name)).toContain("notes.txt");

    // Deleted on the host, outside Berth.
    const folder = testbed.newContainers().hostWorkdirOf(spec);
    await fs.rm(folder, { recursive: true });

    const bash = await tool("Bash", { command: "ls" });
    expect(bash.isError).toBe(true);
    expect(bash.content).toMatch(/files are gone/);
    expect(bash.content).not.toMatch(/breakout|OCI|runc/);
    const vanished = { code: "CONFLICT", details: { reason: "workspace_vanished" } };
    await expect(workspace.machine.list(".")).rejects.toMatchObject(vanished);
    await expect(workspace.machine.writeFile("other.txt", "x")).rejects.toMatchObject(vanished);
    await expect(workspace.machine.exec(["true"])).rejects.toMatchObject(vanished);
    const write = await tool("Write", { file_path: "/workspace/other.txt", content: "x" });
    expect(write).toMatchObject({ isError: true, content: expect.stringMatching(/files are gone/) });
    expect(workspace.vanished).toBe(true);
    expect(await workspace.isAlive()).toBe(false);
    expect(await worker.exists(spec)).toBe(false);

    // Someone recreates an empty folder under the same path: it is not the workspace's data.
    await fs.mkdir(folder);
    expect(await worker.exists(spec)).toBe(false);
    expect(await workspace.isAlive()).toBe(false);
    await expect(workspace.machine.list(".")).rejects.toMatchObject(vanished);

    // The next use re-provisions through the gate (which sees the data lost) on a new folder.
    const fresh = await manager.getWorkspace(spec);
    expect(fresh).not.toBe(workspace);
    expect(gate).toEqual({ machineGone: 1, dataLost: 1 });
    expect((await fresh.machine.list(".")).map((entry) => entry.name)).not.toContain("notes.txt");
    const run = await fresh.machine.exec(["sh", "-c", "echo new > new.txt && cat new.txt"]);
    expect(run).toMatchObject({ exitCode: 0 });
    expect(run.stdout.toString()).toBe("new\n");
    // The container works on the folder on the host now (not on the deleted one).
    expect(await fs.readFile(`${folder}/new.txt`, "utf8")).toBe("new\n");
    expect(await worker.exists(spec)).toBe(true);
    expect(await fresh.isAlive()).toBe(true);
    expect(await toolRunner(fresh)("Bash", { command: "cat new.txt" })).toMatchObject({ isError: false });
  });
});

function toolRunner(workspace: Workspace) {
  const tools = workspace.listTools();
  return (name: string, input: Record<string, unknown>) => {
    const found = tools.find((candidate) => candidate.name === name);
    if (!found) throw new Error(`no ${name} tool`);
    return found.execute(input);
  };
}
