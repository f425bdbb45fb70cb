/**
 * The E2B driver's warm pool under the pool core (server/modules/pool/) on real PostgreSQL: `pool.refill`'s
 * function fills the pool, a first use's claim binds the pooled sandbox, the next refill makes a new one
 * without touching the bound one and discards a pool sandbox that has no row, and a changed config (another
 * pool key) has the old idle sandbox discarded. The driver gets a kind of its own, so the rows of this file
 * never meet another test's.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "vitest";
import { processBerth } from "@/server/composition/process-berth";
import { getDb } from "@/server/db";
import { driverSetOf } from "@/server/engine/driver-set";
import { createLogger } from "@/server/logger";
import { refillWarmPools } from "@/server/modules/pool/warm-pool-refill.service";
import { machineForProvision, type WarmClaimDeps } from "@/server/modules/pool/warm-pool.service";
import type { WorkspaceDriver } from "@/server/workspace/drivers/driver";
import { createDriverTestbed, type DriverTestbed } from "../support/e2b-driver-env";
import { describeE2b } from "../support/e2b-env";

const log = createLogger({ level: "silent" });

describeE2b("E2B warm pool under the pool core", () => {
  let testbed: DriverTestbed;
  const kind = `e2b-t${randomBytes(4).toString("hex")}`;
  /** A driver of the test's own kind (rows are keyed by kind). */
  const ofKind = (driver: WorkspaceDriver): WorkspaceDriver => ({ ...driver, kind });
  const depsOf = (driver: WorkspaceDriver): WarmClaimDeps => ({
    drivers: driverSetOf([driver]),
    config: { pools: { [kind]: { min: 1, max: 1 } }, refillIntervalMs: 60_000 },
    db: getDb(),
    quota: processBerth().quota,
  });
  const rows = () => getDb().warmMachine.findMany({ where: { backendKind: kind } });

  beforeAll(async () => {
    testbed = await createDriverTestbed();
  });
  afterAll(async () => {
    await getDb().warmMachine.deleteMany({ where: { backendKind: kind } });
    await getDb().warmPoolUse.deleteMany({ where: { backendKind: kind } });
    await testbed?.cleanup();
  });

  it("refills, binds on a first use, refills again around the bound sandbox, follows a key change", async () => {
    const driver = ofKind(testbed.newDriver());
    const deps = depsOf(driver);
    expect(await refillWarmPools(deps, log)).toEqual([expect.objectContaining({ created: 1, failed: 0 })]);
    const [row] = await rows();
    expect(row).toMatchObject({ state: "IDLE", poolKey: await driver.warmPoolKey!() });
    expect(await driver.listIdleMachines!()).toEqual([row!.id]);

    const spec = testbed.spec();
    const { handle, pooled } = await machineForProvision(deps, driver, spec, {
      firstUse: true,
      onProgress: undefined,
      log,
    });
    if (!pooled.served) throw new Error(`not served: ${pooled.reason}`);
    expect(handle).toMatchObject({ pool: row!.id });
    const bound = { ...spec, handle };
    const machine = await driver.attach(bound);
    expect((await machine.exec(["sh", "-c", "echo warm"])).stdout.toString()).toBe("warm\n");
    await driver.detach(machine);
    expect(await rows()).toEqual([]);

    // A pool sandbox without a row (its refill died before recording it) is nobody's: discarded.
    await driver.createIdleMachine!("rowless");
    const [again] = await refillWarmPools(deps, log);
    expect(again).toMatchObject({ created: 1, discarded: 1, failed: 0 });
    expect(await driver.listIdleMachines!()).toEqual([(await rows())[0]!.id]);
    expect(await driver.exists(bound)).toBe(true);
    expect(await driver.listResources()).toContainEqual(
      expect.objectContaining({ workspaceId: spec.workspaceId, locator: handle.sandboxId }),
    );

    // The config changed (another key): the old idle sandbox goes, a new one comes; the bound one stays.
    const changed = ofKind(testbed.newDriver({ minCpuCount: 1 }));
    const [old] = await rows();
    expect(await refillWarmPools(depsOf(changed), log)).toEqual([
      expect.objectContaining({ created: 1, discarded: 1 }),
    ]);
    const [fresh] = await rows();
    expect(fresh).toMatchObject({ state: "IDLE", poolKey: await changed.warmPoolKey!() });
    expect(fresh!.id).not.toBe(old!.id);
    expect(await changed.listIdleMachines!()).toEqual([fresh!.id]);
    expect(await changed.exists(bound)).toBe(true);
    expect(await changed.purge(bound)).toEqual([`sandbox:${String(handle.sandboxId)}`]);
  });
});
