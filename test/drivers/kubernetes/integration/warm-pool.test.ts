/**
 * Warm pools on the Kubernetes backend end to end: real workers, Redis queues and PostgreSQL, the driver
 * over the loopback API server emulator. `pool.refill` makes an identity-free pool Pod; a first use of a
 * tenant's Kubernetes workspace binds it (no Pod created for the workspace) and its refill makes the next
 * one, which another tenant's first use gets with nothing of the first one's in it.
 */
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { getDb } from "@/server/db";
import { listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { createEnqueue } from "@/server/queue/enqueue";
import { createTestTenant, type TestTenant } from "../../../integration/db/fixtures";
import { startKubeTestBackend } from "../../../integration/workspace/backend-drivers";
import {
  freshSession,
  startWorkspaceHarness,
  type WorkspaceHarness,
} from "../../../integration/workspace/harness";
import { describeKube } from "../support/kube-env";

const POOL = { min: 1, max: 1 };
/** A Pod start and its gateway: seconds on a quiet machine, far more on a loaded 2-core one. */
const WAIT = { timeout: 120_000, interval: 100 };

describeKube("warm pools on the Kubernetes backend (real workers)", { timeout: 300_000 }, () => {
  let kube: Awaited<ReturnType<typeof startKubeTestBackend>>;
  let h: WorkspaceHarness;
  let a: TestTenant;
  let b: TestTenant;

  const rows = () => getDb().warmMachine.findMany({ where: { backendKind: "kubernetes" } });
  const idle = async () => (await rows()).filter((row) => row.state === "IDLE").length;
  const clearRows = async () => {
    await getDb().warmMachine.deleteMany({ where: { backendKind: "kubernetes" } });
    await getDb().warmPoolUse.deleteMany({ where: { backendKind: "kubernetes" } });
  };
  const pods = async () =>
    (await kube.core.listNamespacedPod({ namespace: kube.namespace })).items.map(
      (pod) => pod.metadata!.name!,
    );
  const bound = async (tenant: TestTenant, workspaceId: string) =>
    (await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["provisioning"] }, getDb())).some(
      (event) => (event.reason ?? "").startsWith("pool.bound"),
    );

  beforeAll(async () => {
    await clearRows();
    kube = await startKubeTestBackend();
    h = await startWorkspaceHarness(
      {
        backends: ["local", "kubernetes"],
        warmPools: { pools: { kubernetes: POOL }, refillIntervalMs: 60_000 },
      },
      { moreDrivers: () => [kube.driver] },
    );
    [a, b] = await Promise.all([createTestTenant(), createTestTenant()]);
  });
  afterAll(async () => {
    await h?.close();
    await kube?.close();
    await clearRows();
  });

  it("a refill makes a pool Pod; a first use binds it, and the claim's refill makes the next", async () => {
    await createEnqueue(h.queues)("pool.refill", { trigger: "manual" });
    await vi.waitFor(async () => expect(await idle()).toBe(1), WAIT);
    const [first] = await rows();
    expect(await pods()).toEqual([`berth-pool-${first!.id}`]);
    expect(await kube.driver.listResources()).toEqual([]);

    const { session, workspaceId } = await freshSession(a.scope, "PER_AGENT", { backend: "kubernetes" });
    const { workspace } = await h.service.resolveForSession(a.scope, session.id);
    expect(workspace.kind).toBe("kubernetes");
    expect(await bound(a, workspaceId)).toBe(true);
    const ran = await workspace.machine.exec(["sh", "-c", "hostname; echo secret-of-a > a.txt"]);
    expect(ran.stdout.toString()).toBe(`berth-pool-${first!.id}\n`);
    // No Pod of the workspace's own: the pool's is its machine, listed with its ids.
    expect((await pods()).filter((name) => name.startsWith("berth-ws-"))).toEqual([]);
    expect((await kube.driver.listResources()).map((resource) => resource.workspaceId)).toEqual([
      workspaceId,
    ]);
    await vi.waitFor(async () => expect(await idle()).toBe(1), WAIT);
  });

  it("another tenant's first use gets the next pool Pod, with nothing of the first tenant's", async () => {
    await vi.waitFor(async () => expect(await idle()).toBe(1), WAIT);
    const { session, workspaceId } = await freshSession(b.scope, "PER_AGENT", { backend: "kubernetes" });
    const { workspace } = await h.service.resolveForSession(b.scope, session.id);
    expect(await bound(b, workspaceId)).toBe(true);
    const listing = await workspace.machine.exec(["sh", "-c", "ls -A; cat a.txt 2>&1; true"]);
    expect(listing.stdout.toString()).not.toContain("secret-of-a");
    expect((await kube.driver.listResources()).map((resource) => resource.tenantId).sort()).toEqual(
      [a.tenantId, b.tenantId].sort(),
    );
  });
});
