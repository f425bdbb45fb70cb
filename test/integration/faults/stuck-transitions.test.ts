/**
 * What a PostgreSQL outage (or a Redis that lost its data) leaves behind: a record in PROVISIONING or
 * STOPPING with no job left to finish it (the job spent its attempts, and even its FAILED write failed).
 * Reconcile must find it and resolve it, here with real Redis queues and an in-process worker runtime.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getDb } from "@/server/db";
import { getWorkspace, listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { createEnqueue } from "@/server/queue/enqueue";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { jobOutcome } from "../queue/queue-fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";

describe("reconcile resolves records stuck in a transition", { timeout: 90_000 }, () => {
  let tenant: TestTenant;
  let h: WorkspaceHarness;

  beforeAll(async () => {
    tenant = await createTestTenant();
    h = await startWorkspaceHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  /** The record as the outage left it: in `state` for an hour, no job in Redis. */
  async function strand(workspaceId: string, state: "PROVISIONING" | "STOPPING"): Promise<void> {
    await getDb().workspace.update({
      where: { id: workspaceId },
      data: { state, stateChangedAt: new Date(Date.now() - 60 * 60_000) },
    });
  }

  async function reconcile(): Promise<void> {
    await createEnqueue(h.queues)("workspace.reconcile", { trigger: "manual" });
  }

  it("STOPPING with no stop job → stopped; PROVISIONING with no provision job → READY, each with an event", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    await h.service.resolveForSession(tenant.scope, session.id);
    expect((await getWorkspace(tenant.scope, workspaceId, getDb())).state).toBe("READY");
    const provisionedBefore = h.machine.provisioned.length;

    await strand(workspaceId, "STOPPING");
    await reconcile();
    await vi.waitFor(
      async () => expect((await getWorkspace(tenant.scope, workspaceId, getDb())).state).toBe("STOPPED"),
      { timeout: 30_000, interval: 200 },
    );
    expect(h.machine.stopped).toContain(workspaceId);

    await strand(workspaceId, "PROVISIONING");
    await reconcile();
    await vi.waitFor(
      async () => expect((await getWorkspace(tenant.scope, workspaceId, getDb())).state).toBe("READY"),
      { timeout: 30_000, interval: 200 },
    );
    expect(h.machine.provisioned.length).toBe(provisionedBefore + 1);

    const reasons = (await listWorkspaceEvents(tenant.scope, workspaceId, {}, getDb())).map(
      (e) => e.reason ?? "",
    );
    expect(reasons.some((r) => /^reconcile: STOPPING since .* enqueued again/.test(r))).toBe(true);
    expect(reasons.some((r) => /^reconcile: PROVISIONING since .* enqueued again/.test(r))).toBe(true);
  });

  it("a fresh transition (its job still about to run) is left alone", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    await h.service.resolveForSession(tenant.scope, session.id);
    await getDb().workspace.update({
      where: { id: workspaceId },
      data: { state: "PROVISIONING", stateChangedAt: new Date() },
    });
    const job = await createEnqueue(h.queues)("workspace.reconcile", { trigger: "manual", dryRun: true });
    const report = (await jobOutcome(h.queues.get("workspace"), job)) as {
      resumed: { workspaceId: string }[];
    };
    expect(report.resumed.map((r) => r.workspaceId)).not.toContain(workspaceId);
    await getDb().workspace.update({ where: { id: workspaceId }, data: { state: "READY" } });
  });
});
