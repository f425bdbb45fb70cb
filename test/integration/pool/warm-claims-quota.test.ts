/**
 * A tenant's `warmClaimsPerMinute` (issue 26: one tenant must not drain a pool all tenants share), on the
 * confined `local` driver with real workers, Redis and PostgreSQL: past its limit a tenant's first use is
 * created cold at once, neither refused nor served, while the pool keeps its machine for the others (both
 * claim paths look: the API's warm first use hands it to the workers, whose claim finds the limit too); the
 * tenant's quota view shows the limit and its use; an empty pool consumes none of it.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { processBerth } from "@/server/composition/process-berth";
import { getDb } from "@/server/db";
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { setTenantQuotaOverrides } from "@/server/modules/operator/tenant-quota.service";
import { readWarmPools } from "@/server/modules/pool/warm-pool-status.service";
import { readTenantUsage } from "@/server/modules/quota/quota-admin.service";
import { listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { createEnqueue } from "@/server/queue/enqueue";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";

const POOL = { min: 2, max: 2 };

describe("per-tenant warm pool claims (local driver, real workers)", () => {
  let h: WorkspaceHarness;
  let a: TestTenant;
  let b: TestTenant;

  beforeAll(async () => {
    await getDb().warmMachine.deleteMany({ where: { backendKind: "local" } });
    await getDb().warmPoolUse.deleteMany({ where: { backendKind: "local" } });
    h = await startWorkspaceHarness({
      warmPools: { pools: { local: POOL }, refillIntervalMs: 60_000 },
    });
    [a, b] = await Promise.all([createTestTenant(), createTestTenant()]);
    await setTenantQuotaOverrides(
      cliOperatorActor(),
      { tenantId: a.scope.tenantId, overrides: { warmClaimsPerMinute: 1 } },
      processBerth().quota,
      processBerth().db,
    );
  });
  afterAll(async () => {
    await h?.close();
    await getDb().warmMachine.deleteMany({ where: { backendKind: "local" } });
    await getDb().warmPoolUse.deleteMany({ where: { backendKind: "local" } });
  });

  const idle = () => getDb().warmMachine.count({ where: { backendKind: "local", state: "IDLE" } });
  const poolFull = async () => {
    await createEnqueue(h.queues)("pool.refill", { trigger: "manual" });
    await vi.waitFor(async () => expect(await idle()).toBe(POOL.min), { timeout: 30_000, interval: 50 });
  };
  const bound = async (tenant: TestTenant, workspaceId: string) =>
    (await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["provisioning"] }, getDb()))
      .map((event) => event.reason ?? "")
      .filter((reason) => reason.startsWith("pool.bound: "));
  /** Runs `work` while no refill can add machines (the pool's refill lock, reserveWarmMachines). */
  const withRefillHeld = <T>(work: () => Promise<T>) =>
    getDb().$transaction(
      async (tx) => {
        await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext('warm-pool:local'))`;
        return work();
      },
      { timeout: 60_000 },
    );
  const warmClaimsOf = async (tenant: TestTenant) =>
    (await readTenantUsage(tenant.scope, processBerth().quota, getDb())).limits.find(
      (item) => item.limit === "warmClaimsPerMinute",
    );

  it("past its limit a tenant's first use is created cold while the pool has a machine; others are served", async () => {
    await poolFull();
    const first = await freshSession(a.scope);
    const second = await freshSession(a.scope);
    const other = await freshSession(b.scope);
    await withRefillHeld(async () => {
      const served = await h.service.resolveForSession(a.scope, first.session.id);
      expect(await bound(a, first.workspaceId)).toHaveLength(1);
      expect(await idle()).toBe(POOL.min - 1);

      // A's second first use: not refused, not served, the pool's last machine left where it is.
      const cold = await h.service.resolveForSession(a.scope, second.session.id);
      expect(await bound(a, second.workspaceId)).toEqual([]);
      expect(h.machine.provisioned).toContain(second.workspaceId);
      expect(await idle()).toBe(POOL.min - 1);

      // B has a limit of its own (none): the machine A could not take is B's.
      const warm = await h.service.resolveForSession(b.scope, other.session.id);
      expect(await bound(b, other.workspaceId)).toHaveLength(1);
      expect(h.machine.provisioned).not.toContain(other.workspaceId);
      expect(await idle()).toBe(POOL.min - 2);

      for (const { workspace } of [served, cold, warm])
        expect((await workspace.machine.exec(["sh", "-c", "echo ok"])).stdout.toString()).toBe("ok\n");
    });
    const records = await getDb().workspace.findMany({
      where: { id: { in: [first.workspaceId, second.workspaceId, other.workspaceId] } },
      select: { state: true },
    });
    expect(records.map((record) => record.state)).toEqual(["READY", "READY", "READY"]);
    // The miss is the pool's to see, and each tenant's use is its own (0, B's default: no limit).
    await vi.waitFor(
      async () => expect((await readWarmPools(h.engine, getDb()))[0]).toMatchObject({ hits: 2, misses: 1 }),
      { timeout: 10_000, interval: 50 },
    );
    expect(await warmClaimsOf(a)).toMatchObject({ value: 1, overridden: true, used: 1 });
    expect(await warmClaimsOf(b)).toMatchObject({ value: 0, overridden: false, used: 1 });
  });

  it("an empty pool consumes none of the tenant's warm claims", async () => {
    const c = await createTestTenant();
    await setTenantQuotaOverrides(
      cliOperatorActor(),
      { tenantId: c.scope.tenantId, overrides: { warmClaimsPerMinute: 1 } },
      processBerth().quota,
      processBerth().db,
    );
    await getDb().warmMachine.deleteMany({ where: { backendKind: "local", state: "IDLE" } });
    const created = await freshSession(c.scope);
    await withRefillHeld(async () => {
      await h.service.resolveForSession(c.scope, created.session.id);
    });
    expect(h.machine.provisioned).toContain(created.workspaceId);
    expect(await warmClaimsOf(c)).toMatchObject({ value: 1, used: 0 });
    // Its one claim of the minute is still there for a machine of the pool.
    await poolFull();
    const served = await freshSession(c.scope);
    await h.service.resolveForSession(c.scope, served.session.id);
    expect(await bound(c, served.workspaceId)).toHaveLength(1);
    expect(await warmClaimsOf(c)).toMatchObject({ used: 1 });
  });
});
