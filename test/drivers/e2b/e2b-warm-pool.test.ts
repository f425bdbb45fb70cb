import { Sandbox } from "e2b";
import { afterAll, beforeAll, expect, it } from "vitest";
import { AppError } from "@/server/shared/errors";
import type {
  BackendHandle,
  CreateProgress,
  TenantDriverSettings,
  WorkspaceDriver,
  WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { createDriverTestbed, type DriverTestbed } from "./support/e2b-driver-env";
import { describeE2b } from "./support/e2b-env";

const TENANT_KEY = "e2b_tenant0own0pool0key00000000000000000";

async function rejection(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

async function read(machine: WorkspaceMachine, file: string): Promise<string> {
  return Buffer.concat((await (await machine.readFile(file)).toArray()) as Buffer[]).toString("utf8");
}

/**
 * Warm pools of the `e2b` driver against the emulator (real SDK, sandboxes as containers): identity-free
 * sandboxes of the installation's team, bound by a host record and the root-only marker, found again only
 * through the handle bind returns. Three pool sandboxes in all, each taken through several cases, since a
 * sandbox with its gateway is the expensive part.
 */
describeE2b("E2B driver: warm pool", () => {
  let testbed: DriverTestbed;
  let driver: WorkspaceDriver;
  const stored = new Map<string, Record<string, unknown>>();
  const settings: TenantDriverSettings = {
    forTenant: (backend, tenantId) =>
      Promise.resolve(backend === "e2b" ? (stored.get(tenantId) ?? null) : null),
    tenants: () => Promise.resolve([...stored.keys()]),
  };
  const sdk = () => testbed.emulator.connection;
  const specOf = (tenantId: string, handle: BackendHandle | null = null): WorkspaceSpec => ({
    ...testbed.spec(),
    tenantId,
    handle,
  });
  /** The first tenant's workspace, bound to pool machine `pa` (set by the bind case). */
  let first: WorkspaceSpec;
  let firstSandbox: string;

  beforeAll(async () => {
    testbed = await createDriverTestbed({}, { teamKeys: [TENANT_KEY] });
    driver = testbed.newDriver({}, undefined, settings);
  });
  afterAll(async () => {
    await testbed?.cleanup();
  });

  it("states the capability and a key that follows the template and sizes", async () => {
    expect(driver.capabilities.warmPool).toBe(true);
    const key = await driver.warmPoolKey!();
    expect(key).toMatch(/^[0-9a-f]{16}$/);
    expect(await testbed.newDriver().warmPoolKey!()).toBe(key);
    expect(await testbed.newDriver({ template: "other" }).warmPoolKey!()).not.toBe(key);
    expect(await testbed.newDriver({ minCpuCount: 1 }).warmPoolKey!()).not.toBe(key);
  });

  it("creates an idle sandbox once per id, with no identity, listed idle and never as a resource", async () => {
    const steps: CreateProgress[] = [];
    const idle = await driver.createIdleMachine!("pa", { onProgress: (step) => steps.push(step) });
    expect(idle).toMatchObject({ kind: "e2b", pool: "pa" });
    expect(steps.map((step) => step.step)).toEqual(["sandbox.created", "gateway.started"]);
    expect(await driver.createIdleMachine!("pa")).toEqual(idle);
    const sandboxId = String(idle.sandboxId);
    const info = await Sandbox.getInfo(sandboxId, sdk());
    expect(info.metadata).toEqual({
      "berth.managed": "true",
      "berth.installation": "berth-test",
      "berth.pool": "pa",
      "berth.pool-key": await driver.warmPoolKey!(),
    });
    expect(testbed.emulator.sandbox(sandboxId)?.envVars).toEqual({});
    expect(await driver.listIdleMachines!()).toEqual(["pa"]);
    expect((await driver.listResources()).map((resource) => resource.locator)).not.toContain(sandboxId);
    // Reconcile's orphan reaping cannot be pointed at it either.
    const refused = await rejection(driver.reap({ workspaceId: null, tenantId: null, locator: sandboxId }));
    expect(refused.message).toMatch(/unbound pool machine/);
    expect(testbed.emulator.sandbox(sandboxId)?.state).toBe("running");
  });

  it("binds without creating: another process attaches with the handle, runs commands and keeps files", async () => {
    const [idle] = await Sandbox.list({ ...sdk(), query: { metadata: { "berth.pool": "pa" } } }).nextItems();
    const spec = specOf("tenant-a");
    const handle = await driver.bindIdleMachine!(
      "pa",
      { kind: "e2b", pool: "pa", sandboxId: idle!.sandboxId },
      spec,
    );
    expect(handle).toMatchObject({ kind: "e2b", sandboxId: idle!.sandboxId, pool: "pa", replaced: null });
    first = { ...spec, handle };
    firstSandbox = idle!.sandboxId;
    expect((await Sandbox.list({ ...sdk() }).nextItems()).length).toBe(1);
    // Bound again by a rerun of the same claim: the same handle's nonce, nothing new.
    expect(
      await driver.bindIdleMachine!("pa", { kind: "e2b", pool: "pa", sandboxId: firstSandbox }, spec),
    ).toMatchObject({
      markerNonce: handle.markerNonce,
    });

    const elsewhere = testbed.newDriver();
    const machine = await elsewhere.attach(first);
    expect(await elsewhere.isAlive(machine)).toBe(true);
    const ran = await machine.exec(["sh", "-c", "echo hello > note.txt && id -un && pwd"]);
    expect(ran.exitCode).toBe(0);
    expect(ran.stdout.toString()).toBe(`user\n${machine.workdir}\n`);
    await machine.writeFile("data/kept.txt", "kept across a stop");
    expect(await read(machine, "note.txt")).toBe("hello\n");
    // The agent cannot rewrite whose the sandbox is (the marker is root's).
    expect((await machine.exec(["sh", "-c", "echo x > /opt/berth/workspace.json"])).exitCode).not.toBe(0);
    await elsewhere.detach(machine);

    expect(await driver.listIdleMachines!()).toEqual([]);
    expect(await driver.listResources()).toContainEqual({
      workspaceId: spec.workspaceId,
      tenantId: "tenant-a",
      locator: firstSandbox,
    });
    expect(await driver.exists(first)).toBe(true);
    expect(await driver.usage!(first)).not.toBeUndefined();
  });

  it("stops (pause) and creates again (resume) the bound sandbox with its files; reconcile still lists it", async () => {
    await driver.stop(first);
    expect(testbed.emulator.sandbox(firstSandbox)?.state).toBe("paused");
    expect(await driver.exists(first)).toBe(true);
    expect(await driver.listResources()).toContainEqual(expect.objectContaining({ locator: firstSandbox }));
    // A worker without this runtime dir's record reads the marker (resuming, then pausing it again).
    const otherHost = testbed.newDriver({ runtimeDir: `${testbed.basedir}/other-runtime` });
    expect(await otherHost.listResources()).toContainEqual({
      workspaceId: first.workspaceId,
      tenantId: "tenant-a",
      locator: firstSandbox,
    });
    expect(await otherHost.listIdleMachines!()).toEqual([]);
    expect(testbed.emulator.sandbox(firstSandbox)?.state).toBe("paused");

    const steps: CreateProgress[] = [];
    const handle = await driver.create(first, { onProgress: (step) => steps.push(step) });
    expect(handle).toMatchObject({ sandboxId: firstSandbox, pool: "pa", resumed: true, missing: [] });
    expect(steps.some((step) => step.dataLost)).toBe(false);
    first = { ...first, handle };
    const machine = await driver.attach(first);
    expect(await read(machine, "data/kept.txt")).toBe("kept across a stop");
    await driver.detach(machine);
  });

  it("refuses a tenant with its own team at bind, leaving the pool machine idle", async () => {
    const idle = await driver.createIdleMachine!("pb");
    stored.set("tenant-own", { apiKey: TENANT_KEY });
    const refused = await rejection(driver.bindIdleMachine!("pb", idle, specOf("tenant-own")));
    expect(refused).toMatchObject({ code: "UNPROCESSABLE", details: { reason: "tenant_team" } });
    expect(await driver.listIdleMachines!()).toEqual(["pb"]);
    expect(testbed.emulator.sandbox(String(idle.sandboxId))?.state).toBe("running");
    stored.delete("tenant-own");
  });

  it("keeps two tenants' machines apart: files, listing, and a handle under another tenant", async () => {
    const [idle] = await Sandbox.list({ ...sdk(), query: { metadata: { "berth.pool": "pb" } } }).nextItems();
    const spec = specOf("tenant-b");
    const second = {
      ...spec,
      handle: await driver.bindIdleMachine!(
        "pb",
        { kind: "e2b", pool: "pb", sandboxId: idle!.sandboxId },
        spec,
      ),
    };
    const machine = await driver.attach(second);
    expect((await machine.exec(["sh", "-c", "ls -A"])).stdout.toString()).toBe("");
    await driver.detach(machine);
    const resources = await driver.listResources();
    expect(resources).toContainEqual({
      workspaceId: spec.workspaceId,
      tenantId: "tenant-b",
      locator: idle!.sandboxId,
    });
    expect(resources).toContainEqual({
      workspaceId: first.workspaceId,
      tenantId: "tenant-a",
      locator: firstSandbox,
    });
    // The first tenant's handle under the second tenant's workspace leads nowhere.
    const stolen = { ...second, handle: first.handle };
    expect(await driver.exists(stolen)).toBe(false);
    await driver.stop(stolen);
    expect(testbed.emulator.sandbox(firstSandbox)?.state).toBe("running");
    // Bound to the first workspace already: binding it again to another is refused.
    const again = await rejection(
      driver.bindIdleMachine!(
        "pb",
        { kind: "e2b", pool: "pb", sandboxId: idle!.sandboxId },
        specOf("tenant-a"),
      ),
    );
    expect(again.code).toBe("CONFLICT");
    // Its tenant sets its own team since: the pool machine stays in the installation's team and is found.
    stored.set("tenant-b", { apiKey: TENANT_KEY });
    expect(await driver.exists(second)).toBe(true);
    expect(await driver.purge(second)).toEqual([`sandbox:${idle!.sandboxId}`]);
    stored.delete("tenant-b");
  });

  it("refuses an expired idle machine, which the next listing resumes; discards idle ones (idempotent), never a bound one", async () => {
    const idle = await driver.createIdleMachine!("pc");
    // Paused by E2B at its timeout (the workers were down): not bindable, and the next listing resumes it.
    await Sandbox.pause(String(idle.sandboxId), sdk());
    const expired = await rejection(driver.bindIdleMachine!("pc", idle, specOf("tenant-a")));
    expect(expired).toMatchObject({ code: "CONFLICT", message: expect.stringMatching(/expired/) });
    expect(await driver.listIdleMachines!()).toEqual(["pc"]);
    expect(testbed.emulator.sandbox(String(idle.sandboxId))?.state).toBe("running");
    // A workspace that has a sandbox of its own already (a cold create got that far) keeps it.
    const cold = specOf("tenant-a");
    const coldHandle = await driver.create(cold);
    const hasData = await rejection(driver.bindIdleMachine!("pc", idle, cold));
    expect(hasData).toMatchObject({ code: "CONFLICT", details: { reason: "workspace_has_data" } });
    await driver.purge({ ...cold, handle: coldHandle });
    await Sandbox.pause(String(idle.sandboxId), sdk());
    await driver.discardIdleMachine!("pc", idle);
    expect(testbed.emulator.sandbox(String(idle.sandboxId))).toBeUndefined();
    await driver.discardIdleMachine!("pc", idle);
    await driver.discardIdleMachine!("pc", null);

    await driver.discardIdleMachine!("pa", null);
    expect(testbed.emulator.sandbox(firstSandbox)?.state).toBe("running");
    expect((await rejection(driver.createIdleMachine!("pa"))).code).toBe("CONFLICT");
    expect(await driver.listIdleMachines!()).toEqual([]);
  });

  it("purges the bound machine", async () => {
    expect(await driver.purge(first)).toEqual([`sandbox:${firstSandbox}`]);
    expect(testbed.emulator.sandbox(firstSandbox)).toBeUndefined();
    expect(await driver.exists(first)).toBe(false);
    expect(await driver.listResources()).toEqual([]);
    await expect(driver.attach(first)).rejects.toMatchObject({ code: "UNAVAILABLE" });
  });
});
