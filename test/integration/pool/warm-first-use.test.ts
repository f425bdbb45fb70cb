/**
 * A warm first use served where it is asked for (server/modules/pool/warm-first-use.service.ts), on the
 * confined `local` driver with real workers, Redis queues and PostgreSQL: the API's provision gate claims
 * and binds a pooled machine with no `workspace.provision` job; two replicas first-using one workspace at
 * once bind one machine between them; a quota refusal is typed and takes nothing from the pool; a machine
 * that cannot be bound is discarded and the workers provision the workspace instead.
 */
import fs from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { processBerth } from "@/server/composition/process-berth";
import { getDb } from "@/server/db";
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { setTenantQuotaOverrides } from "@/server/modules/operator/tenant-quota.service";
import { listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { createEnqueue } from "@/server/queue/enqueue";
import { deterministicJobId } from "@/server/queue/types";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";

const POOL = { min: 2, max: 2 };

describe("warm first use in the caller's process (local driver)", () => {
  let h: WorkspaceHarness;
  let a: TestTenant;

  beforeAll(async () => {
    await getDb().warmMachine.deleteMany({ where: { backendKind: "local" } });
    await getDb().warmPoolUse.deleteMany({ where: { backendKind: "local" } });
    h = await startWorkspaceHarness({
      warmPools: { pools: { local: POOL }, refillIntervalMs: 60_000 },
    });
    a = await createTestTenant();
  });
  afterAll(async () => {
    await h?.close();
    await getDb().warmMachine.deleteMany({ where: { backendKind: "local" } });
    await getDb().warmPoolUse.deleteMany({ where: { backendKind: "local" } });
  });

  const idleRows = () =>
    getDb().warmMachine.findMany({
      where: { backendKind: "local", state: "IDLE" },
      select: { id: true, handle: true },
    });
  const poolFull = async () => {
    await createEnqueue(h.queues)("pool.refill", { trigger: "manual" });
    await vi.waitFor(async () => expect((await idleRows()).length).toBe(POOL.min), {
      timeout: 30_000,
      interval: 50,
    });
  };
  const boundMachines = async (tenant: TestTenant, workspaceId: string) =>
    (await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["provisioning"] }, getDb()))
      .map((event) => event.reason ?? "")
      .filter((reason) => reason.startsWith("pool.bound: "))
      .map((reason) => reason.slice("pool.bound: ".length));
  const provisionJob = (workspaceId: string) =>
    h.queues.get("workspace").getJob(deterministicJobId("workspace.provision", workspaceId));
  /** Runs `work` while no refill can add machines (the pool's refill lock, reserveWarmMachines). */
  const withRefillHeld = <T>(work: () => Promise<T>) =>
    getDb().$transaction(
      async (tx) => {
        await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext('warm-pool:local'))`;
        return work();
      },
      { timeout: 60_000 },
    );

  it("binds a pooled machine with no provision job, and the workspace works at once", async () => {
    await poolFull();
    const idle = new Set((await idleRows()).map((row) => row.id));
    const { session, workspaceId } = await freshSession(a.scope);
    const { workspace } = await h.service.resolveForSession(a.scope, session.id);
    const [machine, ...more] = await boundMachines(a, workspaceId);
    expect(more).toEqual([]);
    expect(idle.has(machine!)).toBe(true);
    expect(await provisionJob(workspaceId)).toBeUndefined();
    expect(h.machine.provisioned).not.toContain(workspaceId);
    const record = await getDb().workspace.findUniqueOrThrow({ where: { id: workspaceId } });
    expect(record).toMatchObject({ state: "READY", provisionHolder: null });
    const output = await workspace.machine.exec(["sh", "-c", "echo hello > f.txt && cat f.txt"]);
    expect(output.stdout.toString()).toBe("hello\n");
    expect(await getDb().warmMachine.count({ where: { id: machine! } })).toBe(0);
  });

  it("two replicas first-using one workspace at once bind one machine between them", async () => {
    await poolFull();
    const other = h.replica();
    const { session, workspaceId } = await freshSession(a.scope);
    const [first, second] = await Promise.all([
      h.service.resolveForSession(a.scope, session.id),
      other.resolveForSession(a.scope, session.id),
    ]);
    expect(await boundMachines(a, workspaceId)).toHaveLength(1);
    expect(h.machine.provisioned).not.toContain(workspaceId);
    await first.workspace.machine.exec(["sh", "-c", "echo shared > s.txt"]);
    const read = await second.workspace.machine.exec(["cat", "s.txt"]);
    expect(read.stdout.toString()).toBe("shared\n");
    expect(await getDb().warmMachine.count({ where: { backendKind: "local", state: "CLAIMED" } })).toBe(0);
  });

  it("a quota refusal is typed, and takes nothing from the pool", async () => {
    const c = await createTestTenant();
    await setTenantQuotaOverrides(
      cliOperatorActor(),
      { tenantId: c.scope.tenantId, overrides: { liveWorkspaces: 1 } },
      processBerth().quota,
      processBerth().db,
    );
    await poolFull();
    const served = await freshSession(c.scope);
    await h.service.resolveForSession(c.scope, served.session.id);
    await poolFull();
    const refused = await freshSession(c.scope);
    const before = (await idleRows()).map((row) => row.id).sort();
    await withRefillHeld(async () => {
      await expect(h.service.resolveForSession(c.scope, refused.session.id)).rejects.toMatchObject({
        code: "QUOTA_EXCEEDED",
      });
      expect((await idleRows()).map((row) => row.id).sort()).toEqual(before);
    });
    const record = await getDb().workspace.findUniqueOrThrow({ where: { id: refused.workspaceId } });
    expect(record.state).toBe("PENDING");
  });

  it("a machine that cannot be bound is discarded, and the workers provision the workspace", async () => {
    await poolFull();
    const broken = await idleRows();
    // Their folders gone: the bind's rename fails for each.
    for (const row of broken) await fs.rm((row.handle as { folder: string }).folder, { recursive: true });
    const { session, workspaceId } = await freshSession(a.scope);
    const { workspace } = await h.service.resolveForSession(a.scope, session.id);
    const output = await workspace.machine.exec(["sh", "-c", "echo ok"]);
    expect(output.stdout.toString()).toBe("ok\n");
    // Served by a machine a refill made since, or created: never by a broken one.
    for (const machine of await boundMachines(a, workspaceId))
      expect(broken.map((row) => row.id)).not.toContain(machine);
    await vi.waitFor(
      async () => {
        const left = await getDb().warmMachine.count({ where: { id: { in: broken.map((row) => row.id) } } });
        expect(left).toBe(0);
      },
      { timeout: 30_000, interval: 50 },
    );
  });
});
