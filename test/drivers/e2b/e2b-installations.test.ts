/**
 * Issue 11: installations sharing one E2B team. Without BERTH_E2B_INSTALLATION, every installation used the
 * same metadata value (`berth`), so each listed and reaped the other's sandboxes. Now the default is the
 * installation's own id; sandboxes made under the old default stay usable through their stored handles
 * (metadata cannot change) but are listed and reaped by no one.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import type { WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { ZE2bHandle } from "@/server/workspace/drivers/e2b/e2b-naming";
import { createDriverTestbed, type DriverTestbed } from "./support/e2b-driver-env";
import { describeE2b } from "./support/e2b-env";

describeE2b("E2B sandboxes of several installations on one team", () => {
  let testbed: DriverTestbed;
  const provision = async (driver: WorkspaceDriver, spec: WorkspaceSpec) =>
    ZE2bHandle.parse(await driver.create(spec));
  const listed = async (driver: WorkspaceDriver) =>
    (await driver.listResources()).map((resource) => resource.workspaceId);
  // As boot builds it with BERTH_E2B_INSTALLATION unset: the installation's own id.
  const installation = (id: string) =>
    testbed.newDriver({ installation: undefined }, () => Promise.resolve(id));

  beforeAll(async () => {
    testbed = await createDriverTestbed();
  });
  afterAll(async () => {
    await testbed?.cleanup();
  });

  it("each lists and reaps only its own; a sandbox from the old default keeps its workspace", async () => {
    const [a, b] = [installation("inst-a"), installation("inst-b")];
    const [specA, specB] = [testbed.spec(), testbed.spec()];
    const handleA = await provision(a, specA);
    const handleB = await provision(b, specB);

    expect(await listed(a)).toEqual([specA.workspaceId]);
    expect(await listed(b)).toEqual([specB.workspaceId]);
    await expect(
      a.reap({
        workspaceId: specB.workspaceId,
        tenantId: specB.tenantId,
        locator: handleB.sandboxId,
      }),
    ).rejects.toMatchObject({ code: "BAD_REQUEST" });
    expect(await b.exists({ ...specB, handle: handleB })).toBe(true);

    // Made before installation ids, under the old default metadata value.
    const legacySpec = testbed.spec();
    const legacy = await provision(testbed.newDriver({ installation: "berth" }), legacySpec);
    const again = await provision(installation("inst-a"), { ...legacySpec, handle: legacy });
    expect(again).toMatchObject({ sandboxId: legacy.sandboxId, replaced: null, missing: [] });
    expect(await listed(a)).toEqual([specA.workspaceId]);
    expect(handleA.sandboxId).not.toBe(legacy.sandboxId);
  });
});
