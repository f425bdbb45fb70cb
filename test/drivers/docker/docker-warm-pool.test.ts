import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { BackendHandle, DriverImplementation, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { DockerMachines } from "@/server/workspace/drivers/docker/docker-machines";
import { dockerDriverOver } from "@/server/workspace/drivers/docker/docker-operations";
import { LABELS } from "@/server/workspace/drivers/docker/docker-config";
import { reattachDockerGateway } from "@/server/workspace/drivers/docker/docker-gateway";
import { hostFolderIdentity } from "@/server/workspace/drivers/docker/host-folder";
import { HostFolderMachines } from "@/server/workspace/drivers/host-folder/host-folder-machines";
import type { CreateProgress } from "@/server/workspace/drivers/driver";
import {
  createDockerTestbed,
  describeDocker,
  testInstallationId,
  uniqueWorkspaceId,
} from "./support/docker-env";

/**
 * Docker's warm pool on the real engine: identity-free `berth-pool-<id>` containers made ahead, bound to a
 * workspace by a folder rename, then that workspace's for every operation (any process attaching with the
 * stored handle). Four machines are made once, concurrently, and each case takes the one it needs.
 */
describeDocker("Docker warm pool: idle machines, binding, the bound workspace's lifecycle", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  /** The workers' driver (a second one stands for another process: the API attaching). */
  let worker: DriverImplementation;
  let machines: DockerMachines;
  const run = uniqueWorkspaceId("wp");
  const [forA, forB, idle, crashed] = ["a", "b", "idle", "crash"].map((name) => `${run}-${name}`) as [
    string,
    string,
    string,
    string,
  ];
  const handles = new Map<string, BackendHandle>();
  const progress: CreateProgress[] = [];
  const specFor = (tenantId: string, workspaceId = uniqueWorkspaceId("pw")): WorkspaceSpec => ({
    tenantId,
    userId: "user-pool",
    agentId: "agent-pool",
    workspaceId,
    isolation: "per_agent",
  });
  const tenantA = specFor("tenant-pool-a");
  const tenantB = specFor("tenant-pool-b");
  const newDriver = () => {
    const built = new DockerMachines(testbed.config, { installationId: testInstallationId });
    return { machines: built, driver: dockerDriverOver(built) };
  };
  const inspect = (name: string) =>
    testbed.docker
      .getContainer(name)
      .inspect()
      .catch(() => null);
  const exec = async (machine: Awaited<ReturnType<DriverImplementation["attach"]>>, script: string) => {
    const result = await machine.exec(["sh", "-c", script]);
    return { exitCode: result.exitCode, stdout: result.stdout.toString().trim() };
  };

  beforeAll(async () => {
    testbed = await createDockerTestbed();
    ({ machines, driver: worker } = newDriver());
    const made = await Promise.all(
      [forA, forB, idle, crashed].map((id) =>
        worker.createIdleMachine!(id, { onProgress: (step) => progress.push(step) }),
      ),
    );
    made.forEach((handle, index) => handles.set([forA, forB, idle, crashed][index]!, handle));
  });
  afterAll(async () => {
    for (const spec of [tenantA, tenantB]) await worker?.purge(spec).catch(() => undefined);
    for (const id of [forA, forB, idle, crashed]) {
      await testbed?.docker
        .getContainer(`berth-pool-${id}`)
        .remove({ force: true })
        .catch(() => undefined);
    }
    await testbed?.cleanup();
  });

  it("makes identity-free machines, idempotently, with a healthy gateway, listed as idle and never as workspaces", async () => {
    expect(handles.get(forA)).toEqual({ container: `berth-pool-${forA}`, pool: forA });
    expect(progress.map((step) => step.step)).toEqual(
      expect.arrayContaining(["container.created", "gateway.ready"]),
    );
    const before = await inspect(`berth-pool-${forA}`);
    expect(await worker.createIdleMachine!(forA)).toEqual(handles.get(forA));
    const after = await inspect(`berth-pool-${forA}`);
    expect(after?.Id).toBe(before?.Id);
    expect(after?.State.Running).toBe(true);

    const labels = after!.Config.Labels;
    expect(labels).toMatchObject({
      [LABELS.managed]: "true",
      [LABELS.installation]: await testInstallationId(),
      [LABELS.pool]: forA,
      [LABELS.poolKey]: await worker.warmPoolKey!(),
    });
    for (const identity of [LABELS.tenant, LABELS.user, LABELS.workspace, LABELS.agent]) {
      expect(labels[identity]).toBeUndefined();
    }
    // Same config, same key, from another process' driver.
    expect(await newDriver().driver.warmPoolKey!()).toBe(labels[LABELS.poolKey]);

    const { config } = machines.workspaces;
    expect(await reattachDockerGateway(config, machines.warmPool.paths.runtimeDir(forA))).not.toBeNull();
    const folder = path.join(testbed.dataRoot, ".pool", "docker", forA);
    expect((await fs.stat(folder)).uid).toBe(config.uid); // chowned to the workspace user, as a cold create

    expect(await worker.listIdleMachines!()).toEqual(expect.arrayContaining([forA, forB, idle, crashed]));
    const locators = (await worker.listResources()).map((resource) => resource.locator);
    expect(locators.filter((locator) => locator.startsWith("berth-pool-"))).toEqual([]);
    // The host-folder drivers walk the same base dir: the pool's folders are no workspace of theirs.
    const hostFolders = new HostFolderMachines({
      basedir: testbed.dataRoot,
      folders: { workdirFor: () => "", open: () => Promise.reject(new Error("unused")) },
    });
    expect(await hostFolders.listResources()).toEqual([]);
  });

  it("refuses to bind into a workspace folder that has data, and leaves the machine as it was", async () => {
    const occupied = specFor("tenant-pool-c");
    const target = machines.workspaces.hostWorkdirOf(occupied);
    await fs.mkdir(target, { recursive: true });
    await fs.writeFile(path.join(target, "mine.txt"), "data");
    await expect(worker.bindIdleMachine!(forB, handles.get(forB)!, occupied)).rejects.toMatchObject({
      code: "CONFLICT",
    });
    expect(await fs.readFile(path.join(target, "mine.txt"), "utf8")).toBe("data");
    expect((await fs.stat(path.join(testbed.dataRoot, ".pool", "docker", forB))).isDirectory()).toBe(true);
    expect(await worker.listIdleMachines!()).toContain(forB);
    expect(await machines.warmPool.paths.isBound(forB)).toBe(false);
    await fs.rm(path.join(testbed.dataRoot, "tenant-pool-c"), { recursive: true });
  });

  it("binds fast; another process attaches with the handle; the folder, usage, stop and restart are the workspace's", async () => {
    const poolFolder = path.join(testbed.dataRoot, ".pool", "docker", forA);
    const identity = await hostFolderIdentity(poolFolder);
    const started = performance.now();
    const handle = await worker.bindIdleMachine!(forA, handles.get(forA)!, tenantA);
    const bindMs = performance.now() - started;
    expect(handle).toEqual({ container: `berth-pool-${forA}`, pool: forA });
    expect(bindMs).toBeLessThan(500); // a rename and a small file (a few ms; generous for a loaded host)
    await expect(fs.stat(poolFolder)).rejects.toMatchObject({ code: "ENOENT" });
    const workspaceFolder = machines.workspaces.hostWorkdirOf(tenantA);
    expect(await hostFolderIdentity(workspaceFolder)).toBe(identity);
    expect(await worker.listIdleMachines!()).not.toContain(forA);
    tenantA.handle = handle;

    const api = newDriver().driver;
    const machine = await api.attach(tenantA);
    expect(await api.isAlive(machine)).toBe(true);
    expect(await exec(machine, "id -u")).toEqual({ exitCode: 0, stdout: "1000" });
    await machine.writeFile("secret-a.txt", "tenant A only\n");
    expect(await exec(machine, "cat /workspace/secret-a.txt")).toEqual({
      exitCode: 0,
      stdout: "tenant A only",
    });
    expect(await fs.readFile(path.join(workspaceFolder, "secret-a.txt"), "utf8")).toBe("tenant A only\n");
    // No workspace container was made beside the pool machine.
    expect(await inspect(`berth-pool-${forA}`)).toMatchObject({ State: { Running: true } });
    expect((await worker.listResources()).filter((r) => r.workspaceId === tenantA.workspaceId)).toEqual([
      { workspaceId: tenantA.workspaceId, tenantId: tenantA.tenantId, locator: `berth-pool-${forA}` },
    ]);

    expect(await worker.exists(tenantA)).toBe(true);
    const usage = await worker.usage!(tenantA);
    expect(usage?.diskBytes).toBeGreaterThan(0);
    expect(usage?.processes).toBeGreaterThan(0);

    await worker.stop(tenantA);
    expect(await inspect(`berth-pool-${forA}`)).toMatchObject({ State: { Running: false } });
    expect(await worker.usage!(tenantA)).toBeNull();
    expect(await worker.exists(tenantA)).toBe(true);
    // The next provision restarts the pool machine itself, its files kept.
    expect(await worker.create(tenantA)).toEqual(handle);
    const again = await newDriver().driver.attach(tenantA);
    expect(await exec(again, "cat secret-a.txt")).toEqual({ exitCode: 0, stdout: "tenant A only" });
    expect(await inspect(`berth-pool-${forA}`)).toMatchObject({ State: { Running: true } });
    // The start went through a link at the pool path, removed once mounted.
    await expect(fs.lstat(poolFolder)).rejects.toMatchObject({ code: "ENOENT" });
    expect(await worker.listIdleMachines!()).not.toContain(forA);
  });

  it("keeps tenants apart: a machine bound to tenant B sees nothing of tenant A", async () => {
    tenantB.handle = await worker.bindIdleMachine!(forB, handles.get(forB)!, tenantB);
    const machine = await newDriver().driver.attach(tenantB);
    expect(await exec(machine, "ls -A /workspace")).toEqual({ exitCode: 0, stdout: "" });
    const search = await exec(
      machine,
      "grep -rs 'tenant A only' /workspace /home /tmp /run/berth; echo done",
    );
    expect(search.stdout).toBe("done");
    expect(await exec(machine, "id -u")).toEqual({ exitCode: 0, stdout: "1000" });
    // Bound machines never go back to the pool, and discarding one deletes nothing.
    expect(await worker.listIdleMachines!()).not.toContain(forA);
    expect(await worker.listIdleMachines!()).not.toContain(forB);
    await worker.discardIdleMachine!(forA, handles.get(forA)!);
    expect(await inspect(`berth-pool-${forA}`)).not.toBeNull();
    const folderA = machines.workspaces.hostWorkdirOf(tenantA);
    expect(await fs.readFile(path.join(folderA, "secret-a.txt"), "utf8")).toBe("tenant A only\n");
    await expect(worker.createIdleMachine!(forA)).rejects.toMatchObject({ code: "CONFLICT" });
  });

  it("discards an idle machine whole, idempotently; never pools a folder with files in it", async () => {
    await fs.writeFile(path.join(testbed.dataRoot, ".pool", "docker", idle, "stray.txt"), "not pristine");
    await expect(worker.createIdleMachine!(idle)).rejects.toMatchObject({ code: "CONFLICT" });
    await worker.discardIdleMachine!(idle, handles.get(idle)!);
    expect(await inspect(`berth-pool-${idle}`)).toBeNull();
    await expect(fs.stat(path.join(testbed.dataRoot, ".pool", "docker", idle))).rejects.toMatchObject({
      code: "ENOENT",
    });
    await expect(fs.stat(machines.warmPool.paths.runtimeDir(idle))).rejects.toMatchObject({ code: "ENOENT" });
    expect(await worker.listIdleMachines!()).not.toContain(idle);
    await worker.discardIdleMachine!(idle, null);
  });

  it("a binding whose rename never happened: not idle, listed as its workspace's, purged with it", async () => {
    const orphan = specFor("tenant-pool-d");
    const paths = machines.warmPool.paths;
    const identity = (await hostFolderIdentity(paths.folder(crashed)))!;
    // What a crash between the binding record and the rename leaves behind.
    await paths.writeBinding(crashed, {
      poolId: crashed,
      ...orphan,
      workdirIdentity: identity,
      boundAt: "x",
    });
    expect(await worker.listIdleMachines!()).not.toContain(crashed);
    expect(await worker.listResources()).toContainEqual({
      workspaceId: orphan.workspaceId,
      tenantId: orphan.tenantId,
      locator: `berth-pool-${crashed}`,
    });
    await worker.discardIdleMachine!(crashed, handles.get(crashed)!);
    expect(await inspect(`berth-pool-${crashed}`)).not.toBeNull();
    // The workspace never stored a handle: its purge still finds the machine by its binding.
    expect(await worker.purge(orphan)).toContain(`container:berth-pool-${crashed}`);
    expect(await inspect(`berth-pool-${crashed}`)).toBeNull();
    await expect(fs.stat(paths.folder(crashed))).rejects.toMatchObject({ code: "ENOENT" });
    expect(await paths.isBound(crashed)).toBe(false);
  });

  it("reconcile reaps a bound machine whose workspace has no record", async () => {
    const resource = (await worker.listResources()).find((r) => r.workspaceId === tenantB.workspaceId)!;
    expect(resource.locator).toBe(`berth-pool-${forB}`);
    await worker.reap(resource);
    expect(await inspect(`berth-pool-${forB}`)).toBeNull();
    await expect(fs.stat(machines.workspaces.hostWorkdirOf(tenantB))).rejects.toMatchObject({
      code: "ENOENT",
    });
    expect(await machines.warmPool.paths.isBound(forB)).toBe(false);
  });

  it("a provision under another pool key gives the workspace its own container on the same folder; purge removes it", async () => {
    // Another config (an env var): another key, as after an upgrade of the image or the driver's settings.
    const upgraded = dockerDriverOver(
      new DockerMachines(
        { ...testbed.config, env: { BERTH_POOL_TEST: "1" } },
        { installationId: testInstallationId },
      ),
    );
    expect(await upgraded.warmPoolKey!()).not.toBe(await worker.warmPoolKey!());
    const handle = await upgraded.create(tenantA);
    expect(handle).toEqual({ container: expect.stringMatching(/^berth-ws-/) as unknown });
    expect(await inspect(`berth-pool-${forA}`)).toBeNull();
    expect(await machines.warmPool.paths.isBound(forA)).toBe(false);
    tenantA.handle = handle;
    const machine = await upgraded.attach(tenantA);
    expect(await exec(machine, "cat secret-a.txt; echo $BERTH_POOL_TEST")).toEqual({
      exitCode: 0,
      stdout: "tenant A only\n1",
    });

    const deleted = await worker.purge(tenantA);
    expect(deleted).toEqual([
      `container:${String(handle.container)}`,
      `directory:${machines.workspaces.hostWorkdirOf(tenantA)}`,
    ]);
    expect(await inspect(String(handle.container))).toBeNull();
    expect(await worker.exists(tenantA)).toBe(false);
    expect((await worker.listResources()).map((r) => r.workspaceId)).not.toContain(tenantA.workspaceId);
  });
});
