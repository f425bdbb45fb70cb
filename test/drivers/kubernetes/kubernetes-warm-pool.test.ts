import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "vitest";
import { isAppError } from "@/server/shared/errors";
import type { BackendHandle, WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { createDriverTestbed, describeKube, type DriverTestbed } from "./support/kube-env";

/**
 * Warm pools on the Kubernetes driver against the emulator: identity-free `berth-pool-<id>` Pods and
 * claims, bound to a workspace by relabelling (no Pod created), then the workspace's in every operation.
 * Three pool machines start in parallel (a Pod start costs seconds here) and serve every case.
 */
describeKube("Kubernetes warm pool", () => {
  let bed: DriverTestbed;
  let driver: WorkspaceDriver;
  /** Another Berth process (its own client and tunnels): attaches through the stored handle only. */
  let other: WorkspaceDriver;
  const ids = { a: newId(), b: newId(), c: newId() };
  const handles: Record<string, BackendHandle> = {};
  let first: WorkspaceSpec;
  let firstHandle: BackendHandle;

  function newId() {
    return `m${randomBytes(10).toString("hex")}`;
  }

  const readPod = (name: string) =>
    bed.core.readNamespacedPod({ namespace: bed.namespace, name }).catch(() => null);
  const readClaim = (name: string) =>
    bed.core.readNamespacedPersistentVolumeClaim({ namespace: bed.namespace, name }).catch(() => null);

  const conflictOf = (promise: Promise<unknown>) =>
    promise.then(
      () => "resolved",
      (error: unknown) =>
        isAppError(error) ? `${error.code}:${String(error.details?.reason)}` : String(error),
    );

  beforeAll(async () => {
    bed = await createDriverTestbed();
    driver = bed.newDriver();
    other = bed.newDriver();
    first = bed.specFor();
  });
  afterAll(async () => {
    await bed?.cleanup();
  });

  it("makes identity-free machines, idempotently, listed as idle and never as workspace resources", async () => {
    expect(driver.capabilities.warmPool).toBe(true);
    const key = await driver.warmPoolKey!();
    expect(key).toMatch(/^[0-9a-f]{16}$/);
    expect(await bed.newDriver({ limits: { cpu: "1", memory: "512Mi" } }).warmPoolKey!()).not.toBe(key);

    const made = await Promise.all(Object.values(ids).map((id) => driver.createIdleMachine!(id)));
    Object.values(ids).forEach((id, index) => (handles[id] = made[index]!));
    // Again (a refill run again after a crash): the same Pod, not a new one.
    const again = await driver.createIdleMachine!(ids.a);
    expect(again).toEqual(handles[ids.a]);
    expect(handles[ids.a]).toMatchObject({ pod: `berth-pool-${ids.a}`, pool: ids.a });

    const pod = (await readPod(`berth-pool-${ids.a}`))!;
    const labels = pod.metadata!.labels!;
    expect(labels).toMatchObject({
      "berth.dev/installation": "test-kubernetes",
      "berth.dev/pool": ids.a,
      "berth.dev/pool-key": key,
      "berth.dev/pool-state": "idle",
    });
    const identity = ["berth.dev/workspace", "berth.dev/tenant", "berth.dev/user", "berth.dev/workspace-key"];
    for (const label of identity) expect(labels).not.toHaveProperty(label);
    const env = JSON.stringify(pod.spec!.containers.map((container) => container.env));
    expect(env).not.toMatch(/tenant-k8s|user-k8s/);
    const claim = (await readClaim(`berth-pool-${ids.a}-data`))!;
    for (const label of identity) expect(claim.metadata!.labels).not.toHaveProperty(label);

    expect(await driver.listIdleMachines!()).toEqual(Object.values(ids).sort());
    expect(await driver.listResources()).toEqual([]);
  });

  it("binds without creating a Pod; any process attaches through the handle, runs commands and keeps files", async () => {
    const uid = (await readPod(`berth-pool-${ids.a}`))!.metadata!.uid;
    const started = Date.now();
    firstHandle = await driver.bindIdleMachine!(ids.a, handles[ids.a]!, first);
    const bindMs = Date.now() - started;
    expect(bindMs).toBeLessThan(5_000);
    expect(firstHandle).toMatchObject({ pod: `berth-pool-${ids.a}`, pool: ids.a, podUid: uid });
    const spec = { ...first, handle: firstHandle };

    const machine = await other.attach(spec);
    const ran = await machine.exec(["sh", "-c", "echo hello from $(hostname)"]);
    expect(ran.stdout.toString()).toBe(`hello from berth-pool-${ids.a}\n`);
    await machine.writeFile("notes/first.txt", "kept across a stop");
    expect((await machine.exec(["cat", "notes/first.txt"])).stdout.toString()).toBe("kept across a stop");
    expect(await other.isAlive(machine)).toBe(true);
    await machine.close();

    const bound = (await readPod(`berth-pool-${ids.a}`))!;
    expect(bound.metadata!.uid).toBe(uid);
    expect(bound.metadata!.labels).toMatchObject({
      "berth.dev/tenant": first.tenantId,
      "berth.dev/pool-state": "bound",
    });
    expect(await driver.listIdleMachines!()).toEqual([ids.b, ids.c].sort());
    expect(await driver.listResources()).toEqual([
      {
        workspaceId: first.workspaceId,
        tenantId: first.tenantId,
        locator: `${bed.namespace}/berth-pool-${ids.a}`,
      },
    ]);
    expect(await driver.exists(spec)).toBe(true);
    expect(await driver.usage!(spec)).not.toBeNull();
  });

  it("refuses a second machine for a workspace that has one, leaving the pool machine idle", async () => {
    expect(await conflictOf(driver.bindIdleMachine!(ids.b, handles[ids.b]!, first))).toBe(
      "CONFLICT:workspace_has_machine",
    );
    expect((await readPod(`berth-pool-${ids.b}`))!.metadata!.labels!["berth.dev/pool-state"]).toBe("idle");
    expect(await driver.listIdleMachines!()).toContain(ids.b);
    // A handle of another machine, or a quota the Pod was not made with: refused as well.
    expect(await conflictOf(driver.bindIdleMachine!(ids.b, handles[ids.c]!, bed.specFor()))).toMatch(
      /^BAD_REQUEST/,
    );
    const quota = { ...bed.specFor(), resources: { cpus: 0.5 } };
    expect(await conflictOf(driver.bindIdleMachine!(ids.b, handles[ids.b]!, quota))).toBe(
      "CONFLICT:resources_differ",
    );
  });

  it("isolates tenants: another tenant's machine has none of the first one's files or labels", async () => {
    const second = { ...bed.specFor(), tenantId: "tenant-two", userId: "user-two" };
    const handle = await driver.bindIdleMachine!(ids.b, handles[ids.b]!, second);
    const machine = await driver.attach({ ...second, handle });
    expect((await machine.exec(["ls", "-A", "/workspace"])).stdout.toString()).toBe("");
    await machine.close();
    // The first tenant's handle leads nowhere into the second's machine, nor the reverse.
    const crossed = { ...first, handle };
    await expect(driver.attach(crossed)).rejects.toThrow(/not bound to this workspace/);
    expect(await driver.exists(crossed)).toBe(false);
    expect(await conflictOf(driver.stop(crossed))).toMatch(/^CONFLICT/);
    const resources = await driver.listResources();
    expect(resources.map((resource) => resource.tenantId).sort()).toEqual([first.tenantId, "tenant-two"]);
  });

  it("discards an idle machine whole and idempotently, and never a bound one", async () => {
    // Reconcile never reaps an unbound machine, even when named to it.
    const idle = { workspaceId: null, tenantId: null, locator: `${bed.namespace}/berth-pool-${ids.c}` };
    expect(await conflictOf(driver.reap(idle))).toMatch(/^BAD_REQUEST/);
    await driver.discardIdleMachine!(ids.c, handles[ids.c]!);
    expect(await readPod(`berth-pool-${ids.c}`)).toBeNull();
    expect(await readClaim(`berth-pool-${ids.c}-data`)).toBeNull();
    await driver.discardIdleMachine!(ids.c, null);

    await driver.discardIdleMachine!(ids.b, handles[ids.b]!);
    expect((await readPod(`berth-pool-${ids.b}`))?.metadata?.labels?.["berth.dev/pool-state"]).toBe("bound");
    expect(await readClaim(`berth-pool-${ids.b}-data`)).not.toBeNull();
    // A bound machine is nobody's pool machine any more: it cannot be made idle again either.
    expect(await conflictOf(driver.createIdleMachine!(ids.b))).toMatch(/^CONFLICT/);
    expect(await driver.listIdleMachines!()).toEqual([]);
  });

  it("reaps a bound machine whose workspace has no record, found by listResources", async () => {
    const orphan = (await driver.listResources()).find((resource) => resource.tenantId === "tenant-two")!;
    expect(orphan.locator).toBe(`${bed.namespace}/berth-pool-${ids.b}`);
    await driver.reap(orphan);
    expect(await readPod(`berth-pool-${ids.b}`)).toBeNull();
    expect(await readClaim(`berth-pool-${ids.b}-data`)).toBeNull();
    expect((await driver.listResources()).map((resource) => resource.tenantId)).toEqual([first.tenantId]);
  });

  it("stops, recreates the Pod on the same claim with the files, and purges Pod and claim", async () => {
    const spec = { ...first, handle: firstHandle };
    await driver.stop(spec);
    expect(await readPod(`berth-pool-${ids.a}`)).toBeNull();
    expect(await driver.exists(spec)).toBe(true);
    expect(await driver.listResources()).toContainEqual(
      expect.objectContaining({ workspaceId: first.workspaceId }),
    );

    const handle = await driver.create(spec);
    expect(handle).toMatchObject({ pod: `berth-pool-${ids.a}`, pool: ids.a });
    expect(handle.podUid).not.toBe(firstHandle.podUid);
    const recreated = (await readPod(`berth-pool-${ids.a}`))!;
    expect(recreated.metadata!.labels).toMatchObject({ "berth.dev/tenant": first.tenantId });
    const machine = await other.attach({ ...first, handle });
    expect((await machine.exec(["cat", "notes/first.txt"])).stdout.toString()).toBe("kept across a stop");
    await machine.close();

    const deleted = await driver.purge({ ...first, handle });
    expect(deleted.sort()).toEqual([
      `persistentvolumeclaim:${bed.namespace}/berth-pool-${ids.a}-data`,
      `pod:${bed.namespace}/berth-pool-${ids.a}`,
    ]);
    expect(await readPod(`berth-pool-${ids.a}`)).toBeNull();
    expect(await readClaim(`berth-pool-${ids.a}-data`)).toBeNull();
    expect(await driver.exists({ ...first, handle })).toBe(false);
  });
});
