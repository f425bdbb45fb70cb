import { Sandbox } from "e2b";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { TenantDriverSettings, WorkspaceDriver } from "@/server/workspace/drivers/driver";
import { createDriverTestbed, type DriverTestbed } from "./support/e2b-driver-env";
import { describeE2b } from "./support/e2b-env";

/**
 * A tenant's own E2B team (issue 13): with settings stored for it, the driver provisions, attaches, stops and
 * purges that tenant's workspaces with its key and template; other tenants stay in the installation's team,
 * and reconcile lists both. The emulator keeps teams apart as E2B does (another key neither lists nor
 * reaches a sandbox).
 */
const TENANT_KEY = "e2b_tenant0own0team0key0000000000000000";

describeE2b("E2B driver with a tenant's own team", () => {
  let testbed: DriverTestbed;
  let driver: WorkspaceDriver;
  const stored = new Map<string, Record<string, unknown>>();
  const settings: TenantDriverSettings = {
    forTenant: (backend, tenantId) =>
      Promise.resolve(backend === "e2b" ? (stored.get(tenantId) ?? null) : null),
    tenants: () => Promise.resolve([...stored.keys()]),
  };
  const tenantConnection = () => ({ ...testbed.emulator.connection, apiKey: TENANT_KEY });

  beforeAll(async () => {
    testbed = await createDriverTestbed(
      {},
      {
        teamKeys: [TENANT_KEY],
        templates: {
          base: { image: "berth-base:bookworm", cpuCount: 1 },
          big: { image: "berth-base:bookworm", cpuCount: 2, memoryMB: 1024 },
        },
      },
    );
    driver = testbed.newDriver({}, undefined, settings);
  });
  afterAll(async () => {
    await testbed?.cleanup();
  });

  it("provisions, attaches, stops and purges the tenant's workspace in its team with its template", async () => {
    stored.set("tenant-own", { apiKey: TENANT_KEY, template: "big", minCpuCount: 2 });
    const own = { ...testbed.spec(), tenantId: "tenant-own" };
    const handle = await driver.create(own);
    const sandboxId = String(handle.sandboxId);
    expect(handle).toMatchObject({ kind: "e2b", template: "big" });
    expect((await Sandbox.getInfo(sandboxId, tenantConnection())).templateId).toBe("big");
    // Not in the installation's team: its key does not even see the sandbox.
    await expect(Sandbox.getInfo(sandboxId, testbed.emulator.connection)).rejects.toThrow(/not found/i);

    const installationSpec = testbed.spec();
    const installationHandle = await driver.create(installationSpec);
    const installationSandbox = String(installationHandle.sandboxId);
    expect((await Sandbox.getInfo(installationSandbox, testbed.emulator.connection)).templateId).toBe("base");

    const located = (await driver.listResources()).map((resource) => resource.locator);
    expect(located).toEqual(expect.arrayContaining([sandboxId, installationSandbox]));

    const backend = await driver.attach({ ...own, handle });
    expect((await backend.exec(["sh", "-c", "echo from the tenant team"])).stdout.toString()).toBe(
      "from the tenant team\n",
    );
    await driver.detach(backend);
    await driver.stop({ ...own, handle });
    expect(testbed.emulator.sandbox(sandboxId)?.state).toBe("paused");
    expect(await driver.exists({ ...own, handle })).toBe(true);

    expect(await driver.purge({ ...own, handle })).toEqual([`sandbox:${sandboxId}`]);
    expect(testbed.emulator.sandbox(sandboxId)).toBeUndefined();
    await driver.purge({ ...installationSpec, handle: installationHandle });
  });

  it("reads the settings on every call (a change applies next time) and refuses invalid ones", async () => {
    stored.set("tenant-own", { apiKey: TENANT_KEY, template: "big", minCpuCount: 4 });
    await expect(driver.create({ ...testbed.spec(), tenantId: "tenant-own" })).rejects.toMatchObject({
      code: "UNPROCESSABLE",
    });
    stored.set("tenant-own", { apiKey: "e2b_revoked0key00000000000" });
    await expect(driver.create({ ...testbed.spec(), tenantId: "tenant-own" })).rejects.toMatchObject({
      code: "INTERNAL",
      userMessage: expect.stringContaining("rejected the API key"),
    });
    stored.set("tenant-own", { template: 42 });
    await expect(driver.create({ ...testbed.spec(), tenantId: "tenant-own" })).rejects.toMatchObject({
      code: "UNPROCESSABLE",
    });
    stored.delete("tenant-own");
  });
});
