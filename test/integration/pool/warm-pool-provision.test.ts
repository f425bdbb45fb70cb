/**
 * Warm pools end to end on the confined `local` driver (real bubblewrap) with real workers, Redis queues and
 * PostgreSQL: `pool.refill` fills the pool; a first use of any tenant binds a pooled machine instead of
 * creating one (the driver's `create` never runs for it) and asks for a refill, which brings the pool back;
 * a later tenant's machine shows nothing of an earlier one's; more first uses at once than idle machines
 * each get a working workspace, the ones the pool could not serve created at once (a miss, never a wait).
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getDb } from "@/server/db";
import { listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { readWarmPools } from "@/server/modules/pool/warm-pool-status.service";
import { createEnqueue } from "@/server/queue/enqueue";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";

const POOL = { min: 2, max: 4 };

describe("warm pools (local driver, real workers)", () => {
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
  });
  afterAll(async () => {
    await h?.close();
    await getDb().warmMachine.deleteMany({ where: { backendKind: "local" } });
    await getDb().warmPoolUse.deleteMany({ where: { backendKind: "local" } });
  });

  const idle = () => getDb().warmMachine.count({ where: { backendKind: "local", state: "IDLE" } });
  const poolSteps = async (tenant: TestTenant, workspaceId: string) =>
    (await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["provisioning"] }, getDb()))
      .map((event) => event.reason ?? "")
      .filter((reason) => reason.startsWith("pool.bound"));

  it("a refill fills the pool to its minimum with identity-free machines", async () => {
    await createEnqueue(h.queues)("pool.refill", { trigger: "manual" });
    await vi.waitFor(async () => expect(await idle()).toBe(POOL.min), { timeout: 30_000, interval: 50 });
    expect((await h.machine.listResources()).length).toBe(0);
  });

  it("a first use binds a pooled machine (no create), and the claim's refill brings the pool back", async () => {
    const { session, workspaceId } = await freshSession(a.scope);
    const { workspace } = await h.service.resolveForSession(a.scope, session.id);
    expect(h.machine.provisioned).not.toContain(workspaceId);
    expect(await poolSteps(a, workspaceId)).toHaveLength(1);
    const whoami = await workspace.machine.exec(["sh", "-c", "id -u; echo secret-of-a > a.txt; ls -A"]);
    expect(whoami.exitCode).toBe(0);
    expect(Number(whoami.stdout.toString().split("\n")[0])).toBeGreaterThan(0);
    // The bound machine is the workspace's: listed with its ids, no longer the pool's.
    expect((await h.machine.listResources()).map((resource) => resource.workspaceId)).toContain(workspaceId);
    await vi.waitFor(async () => expect(await idle()).toBe(POOL.min), { timeout: 30_000, interval: 50 });
  });

  it("another tenant's pooled machine holds nothing of the first one's", async () => {
    const { session, workspaceId } = await freshSession(b.scope);
    const { workspace } = await h.service.resolveForSession(b.scope, session.id);
    expect(await poolSteps(b, workspaceId)).toHaveLength(1);
    const listing = await workspace.machine.exec(["sh", "-c", "ls -A; cat a.txt 2>&1; true"]);
    expect(listing.stdout.toString()).not.toContain("secret-of-a");
    expect(listing.stdout.toString()).not.toContain("a.txt\n");
  });

  it("more first uses at once than idle machines: the pool serves what it has, the rest are created at once", async () => {
    await vi.waitFor(async () => expect(await idle()).toBeGreaterThanOrEqual(POOL.min), {
      timeout: 30_000,
      interval: 50,
    });
    const before = await idle();
    const sessions = await Promise.all(Array.from({ length: before + 2 }, () => freshSession(a.scope)));
    // The claims ask for a refill, which could top the pool up in the middle of the burst: held off by
    // holding the pool's refill lock (warm-pool.data.ts reserveWarmMachines) until every first use is done.
    const resolved = await getDb().$transaction(
      async (tx) => {
        await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext('warm-pool:local'))`;
        return Promise.all(sessions.map(({ session }) => h.service.resolveForSession(a.scope, session.id)));
      },
      { timeout: 60_000 },
    );
    const outputs = await Promise.all(
      resolved.map(({ workspace }) => workspace.machine.exec(["sh", "-c", "echo ok"])),
    );
    expect(outputs.map((output) => output.stdout.toString().trim())).toEqual(sessions.map(() => "ok"));
    const pooled = await Promise.all(sessions.map(({ workspaceId }) => poolSteps(a, workspaceId)));
    const served = pooled.filter((steps) => steps.length === 1).length;
    const created = sessions.filter(({ workspaceId }) => h.machine.provisioned.includes(workspaceId));
    // Every workspace came one way or the other, never both: a claim never returns a machine to the pool.
    expect(served + created.length).toBe(sessions.length);
    expect(served).toBeLessThanOrEqual(before);
    expect(created.length).toBeGreaterThanOrEqual(2);
    // One folder per workspace, each in the workspace layout under its own ids.
    const listed = (await h.machine.listResources()).map((resource) => resource.workspaceId);
    for (const { workspaceId } of sessions) expect(listed).toContain(workspaceId);
    // The operator console's figures: every use of this test counted, the target following the burst.
    const [pool] = await readWarmPools(h.engine, getDb());
    expect(pool).toMatchObject({ backend: "local", min: POOL.min, max: POOL.max });
    expect(pool!.hits).toBe(served + 2);
    expect(pool!.misses).toBe(created.length);
    expect(pool!.target).toBeGreaterThanOrEqual(Math.min(sessions.length, POOL.max));
  });

  it("discards machines made under an older pool key and makes current ones", async () => {
    const stale = `m${randomBytes(10).toString("hex")}`;
    const handle = await h.engine.drivers.forKind("local").createIdleMachine!(stale);
    await getDb().warmMachine.create({
      data: {
        id: stale,
        backendKind: "local",
        poolKey: "older-config",
        state: "IDLE",
        handle: handle as { folder: string; pool: string },
        readyAt: new Date(),
      },
    });
    await createEnqueue(h.queues)("pool.refill", { trigger: "manual" });
    await vi.waitFor(
      async () => {
        expect(await getDb().warmMachine.count({ where: { id: stale } })).toBe(0);
        expect(await h.engine.drivers.forKind("local").listIdleMachines!()).not.toContain(stale);
      },
      { timeout: 30_000, interval: 50 },
    );
  });
});
