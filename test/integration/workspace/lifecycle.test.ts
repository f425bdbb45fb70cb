import fs from "node:fs/promises";
import path from "node:path";
import { text } from "node:stream/consumers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getDb } from "@/server/db";
import { createEnqueue } from "@/server/queue/enqueue";
import { listWorkspaceEvents, getWorkspace } from "@/server/modules/workspace/workspace.data";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { jobOutcome } from "../queue/queue-fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "./harness";
import { hostWorkdirOf } from "../../drivers/local/support/sandbox-env";

const IDLE_TTL_MS = 10 * 60_000;
/** A last activity the sweep counts as idle: twice the idle TTL ago. */
const idleSince = () => new Date(Date.now() - 2 * IDLE_TTL_MS);

describe("workspace resolution, stop, purge, sweep and reconcile (real Postgres, Redis, workers)", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;

  // The idle TTL is also how long this process' engine keeps an attached Workspace nothing pins (work
  // under a lease pins it): at 1 s a busy machine detached a workspace a test was still using between
  // two calls. The sweeps below date back the activity of the workspaces they must find idle (idleSince).
  beforeAll(async () => {
    h = await startWorkspaceHarness({ idleTtlMs: IDLE_TTL_MS });
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await h.close();
  });

  const stateOf = async (workspaceId: string) =>
    (await getWorkspace(tenant.scope, workspaceId, getDb())).state;
  const runJob = async <N extends "workspace.sweep" | "workspace.reconcile">(
    name: N,
    payload: Parameters<ReturnType<typeof createEnqueue<typeof h.queues.catalog>>>[1],
  ) => {
    const job = await createEnqueue(h.queues)(name, payload as never);
    return jobOutcome(h.queues.get("workspace"), job) as Promise<Record<string, unknown>>;
  };

  it("provisions exactly once when 200 concurrent resolves across 4 API replicas hit one fresh workspace", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    const replicas = [h.service, h.replica(), h.replica(), h.replica()];
    const resolved = await Promise.all(
      Array.from({ length: 200 }, (_, i) => replicas[i % 4]!.resolveForSession(tenant.scope, session.id)),
    );
    expect(new Set(resolved.map((r) => r.workspace.id))).toEqual(new Set([workspaceId]));
    // One Workspace object per replica (each process attaches once), one machine provision overall.
    expect(new Set(resolved.map((r) => r.workspace)).size).toBe(4);
    expect(h.machine.provisioned.filter((id) => id === workspaceId)).toHaveLength(1);
    const provisioning = await listWorkspaceEvents(
      tenant.scope,
      workspaceId,
      { kinds: ["provisioning"] },
      getDb(),
    );
    expect(provisioning).toHaveLength(1);
    expect(await stateOf(workspaceId)).toBe("READY");
  });

  it("records each provisioning step the machine reports as a workspace event, in order", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    h.machine.progressSteps = [
      { step: "image.building", detail: "Step 1/3 : FROM berth-base" },
      { step: "container.created", detail: "berth-ws-x" },
      { step: "gateway.ready" },
    ];
    try {
      await h.service.resolveForSession(tenant.scope, session.id);
    } finally {
      h.machine.progressSteps = [];
    }
    // Newest first; reversed, the steps must come out in the order the machine reported them.
    const steps = (await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["provisioning"] }, getDb()))
      .map((event) => event.reason)
      .filter((reason) => reason !== null && /^(image|container|gateway)\./.test(reason))
      .reverse();
    expect(steps).toEqual([
      "image.building: Step 1/3 : FROM berth-base",
      "container.created: berth-ws-x",
      "gateway.ready",
    ]);
    expect(await stateOf(workspaceId)).toBe("READY");
  });

  it("stops on request (state, events with reasons), and a stopped workspace comes back with its files", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    const { workspace } = await h.service.resolveForSession(tenant.scope, session.id);
    await workspace.machine.writeFile(path.posix.join(workspace.workdir, "notes.txt"), "kept across stops");

    const stop = await h.service.requestStop(tenant.scope, workspaceId, { reason: "test stop" });
    expect(stop.state).toBe("STOPPING");
    await vi.waitFor(async () => expect(await stateOf(workspaceId)).toBe("STOPPED"), { timeout: 15_000 });
    const kinds = (await listWorkspaceEvents(tenant.scope, workspaceId, undefined, getDb())).map(
      (e) => `${e.kind}:${e.reason}`,
    );
    expect(kinds).toContain("stopping:test stop");
    expect(kinds).toContain("stopped:test stop");

    const again = await h.service.resolveForSession(tenant.scope, session.id);
    expect(await stateOf(workspaceId)).toBe("READY");
    expect(again.workspace).not.toBe(workspace);
    const content = await text(
      await again.workspace.machine.readFile(path.posix.join(again.workspace.workdir, "notes.txt")),
    );
    expect(content).toBe("kept across stops");
    expect(h.machine.provisioned.filter((id) => id === workspaceId)).toHaveLength(2);
  });

  it("purges: directory gone, state PURGED with event, and a receipt listing what was deleted", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    const skillDir = path.join(h.basedir, "skill-src", "hello");
    await fs.mkdir(skillDir, { recursive: true });
    await fs.writeFile(
      path.join(skillDir, "SKILL.md"),
      "---\nname: hello\ndescription: says hello\n---\nHello.\n",
    );
    // Filled the way a tool call works on it: attached under a lease the sweeper respects, held until done.
    const workdir = await h.service.withSessionWorkspace(
      tenant.scope,
      session.id,
      { holder: "test:setup", reason: "test setup" },
      async (workspace) => {
        await workspace.addSkill(skillDir, "agent-x");
        await workspace.offloadToolResult(session.id, "call-1", "a long tool result");
        return hostWorkdirOf(workspace);
      },
    );

    // While a lease holds it (a turn, a tool call), stop and purge are refused unless forced.
    await h.service.acquireLease(tenant.scope, workspaceId, { holder: "turn:busy", reason: "a turn" });
    for (const request of [
      () => h.service.requestStop(tenant.scope, workspaceId),
      () => h.service.requestPurge(tenant.scope, workspaceId),
    ]) {
      await expect(request()).rejects.toMatchObject({ code: "CONFLICT", details: { activeLeases: 1 } });
    }
    await h.service.releaseLease(tenant.scope, workspaceId, "turn:busy");

    const purge = await h.service.requestPurge(tenant.scope, workspaceId, { reason: "test purge" });
    expect(purge.jobId).toBeTruthy();
    await vi.waitFor(async () => expect(await stateOf(workspaceId)).toBe("PURGED"), { timeout: 15_000 });
    await expect(fs.stat(workdir)).rejects.toThrow();
    const receipts = await h.service.purgeReceipts(tenant.scope, {
      targetType: "workspace",
      targetId: workspaceId,
    });
    expect(receipts).toHaveLength(1);
    const deleted = receipts[0]!.deleted as Record<string, unknown>;
    expect(deleted.resources).toEqual([`directory:${workdir}`]);
    expect(deleted.skills).toContain("agent-x/hello");
    expect(deleted.offloadFiles).toBe(1);
    expect(deleted.databaseRows).toEqual({
      workspaceLeases: 0,
      skillStorage: 0,
      checkpoints: 0,
      checkpointRestores: 0,
    });
    const purged = await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["purged"] }, getDb());
    expect(purged[0]?.reason).toBe("test purge");
    // The binding stays usable (purge-generations.test.ts): the next use is a fresh generation.
    await h.service.resolveForSession(tenant.scope, session.id);
    expect(await getWorkspace(tenant.scope, workspaceId, getDb())).toMatchObject({
      state: "READY",
      generation: 2,
    });
  });

  it("sweeper stops the idle workspace, skips the leased one, and a lease past the hard maximum does not count", async () => {
    const idle = await freshSession(tenant.scope);
    const leased = await freshSession(tenant.scope);
    const stale = await freshSession(tenant.scope);
    for (const s of [idle, leased, stale]) await h.service.resolveForSession(tenant.scope, s.session.id);
    await h.service.acquireLease(tenant.scope, leased.workspaceId, {
      holder: "turn:live",
      reason: "chat turn",
    });
    await h.service.acquireLease(tenant.scope, stale.workspaceId, {
      holder: "turn:stuck",
      reason: "chat turn",
    });
    const ids = [idle.workspaceId, leased.workspaceId, stale.workspaceId];
    await getDb().workspace.updateMany({ where: { id: { in: ids } }, data: { lastActivityAt: idleSince() } });
    // The stuck lease was taken "two hours ago": past the harness' hard maximum of one hour.
    await getDb().workspaceLease.updateMany({
      where: { workspaceId: stale.workspaceId },
      data: { createdAt: new Date(Date.now() - 2 * 3_600_000) },
    });

    const report = await runJob("workspace.sweep", { trigger: "manual" });
    // The sweep and reconcile jobs see every tenant's workspaces: earlier test files leave theirs behind.
    const ours = (found: unknown) => (found as string[]).filter((id) => ids.includes(id)).sort();
    expect(ours(report.stopping)).toEqual([idle.workspaceId, stale.workspaceId].sort());
    expect(ours(report.leased)).toEqual([leased.workspaceId]);
    await vi.waitFor(async () => expect(await stateOf(idle.workspaceId)).toBe("STOPPED"), {
      timeout: 15_000,
    });
    await vi.waitFor(async () => expect(await stateOf(stale.workspaceId)).toBe("STOPPED"), {
      timeout: 15_000,
    });
    expect(await stateOf(leased.workspaceId)).toBe("READY");
    const staleEvents = await listWorkspaceEvents(tenant.scope, stale.workspaceId, undefined, getDb());
    expect(staleEvents.map((e) => e.reason)).toContain("lease exceeded the maximum lease age");
    const idleStop = (
      await listWorkspaceEvents(tenant.scope, idle.workspaceId, { kinds: ["stopping"] }, getDb())
    )[0];
    expect(idleStop?.reason).toMatch(/^idle for more than/);
    expect(idleStop?.actor).toBe("system");
  });

  it("idle time counts work, not traffic: reads never keep a workspace alive, and its page says what does", async () => {
    const browsed = await freshSession(tenant.scope);
    const worked = await freshSession(tenant.scope);
    for (const s of [browsed, worked]) await h.service.resolveForSession(tenant.scope, s.session.id);
    const longAgo = idleSince();
    const ids = [browsed.workspaceId, worked.workspaceId];
    await getDb().workspace.updateMany({ where: { id: { in: ids } }, data: { lastActivityAt: longAgo } });
    // The dashboard browses one (a file listing, status: quiet call leases); a mutating call works on the other.
    await h.content().listFiles(tenant.scope, browsed.workspaceId, ".");
    await h.content().status(tenant.scope, browsed.workspaceId);
    await h.service.withWorkspace(tenant.scope, worked.workspaceId, "workspace.file.write", () =>
      Promise.resolve("ok"),
    );
    const activity = await getDb().workspace.findMany({
      where: { id: { in: ids } },
      select: { id: true, lastActivityAt: true },
    });
    const clockOf = (id: string) => activity.find((row) => row.id === id)!.lastActivityAt!.getTime();
    expect(clockOf(browsed.workspaceId)).toBe(longAgo.getTime());
    expect(clockOf(worked.workspaceId)).toBeGreaterThan(longAgo.getTime());

    // A running turn is what the page names as keeping it alive.
    await h.service.acquireLease(tenant.scope, worked.workspaceId, {
      holder: "turn:t1",
      reason: "chat turn",
    });
    const page = await h.service.get(tenant.scope, worked.workspaceId);
    expect(page.liveness.running).toBe(true);
    expect(page.liveness.reasons[0]).toMatchObject({
      kind: "turn",
      text: "a chat turn is running (chat turn)",
    });
    expect(page.liveness.stopsAfter).toBeNull();
    await h.service.releaseLease(tenant.scope, worked.workspaceId, "turn:t1");

    const report = await runJob("workspace.sweep", { trigger: "manual" });
    expect(report.stopping as string[]).toContain(browsed.workspaceId);
    expect(report.stopping as string[]).not.toContain(worked.workspaceId);
    await vi.waitFor(async () => expect(await stateOf(browsed.workspaceId)).toBe("STOPPED"), {
      timeout: 15_000,
    });
  });

  it("reconcile reaps an orphan folder and marks a record whose folder vanished", async () => {
    const orphan = path.join(h.basedir, "ghost-tenant", "ghost-user", "ghostworkspace");
    await fs.mkdir(orphan, { recursive: true });
    await fs.writeFile(path.join(orphan, "left-behind.txt"), "x");
    const { session, workspaceId } = await freshSession(tenant.scope);
    const { workspace } = await h.service.resolveForSession(tenant.scope, session.id);
    await fs.rm(hostWorkdirOf(workspace), { recursive: true, force: true });

    const report = await runJob("workspace.reconcile", { trigger: "manual", dryRun: false });
    expect(report.reapedOrphans).toEqual([
      { locator: orphan, workspaceId: "ghostworkspace", tenantId: "ghost-tenant" },
    ]);
    // Records of earlier test files (other base directories) look vanished too: only ours is asserted.
    expect(report.markedVanished).toContain(workspaceId);
    await expect(fs.stat(orphan)).rejects.toThrow();
    expect(await stateOf(workspaceId)).toBe("FAILED");
    const failed = await listWorkspaceEvents(tenant.scope, workspaceId, { kinds: ["failed"] }, getDb());
    expect(failed[0]?.reason).toBe("reconcile: backend resources vanished");
    // And it recovers on next use (FAILED → PROVISIONING → READY).
    await h.service.resolveForSession(tenant.scope, session.id);
    expect(await stateOf(workspaceId)).toBe("READY");
  });

  it("session.purge (through the job) deletes the session's offload files and writes a receipt", async () => {
    const { agent, session, workspaceId } = await freshSession(tenant.scope);
    const { workspace } = await h.service.resolveForSession(tenant.scope, session.id);
    await workspace.offloadToolResult(session.id, "call-9", "big output");
    const sessionDir = path.join(hostWorkdirOf(workspace), "sessions", session.id);
    expect((await fs.readdir(sessionDir)).length).toBe(1);

    const { jobId } = await h.service.enqueueSessionPurge(tenant.scope, {
      workspaceId,
      agentId: agent.id,
      sessionIds: [session.id],
    });
    const job = await h.queues.get("workspace").getJob(jobId!);
    await jobOutcome(h.queues.get("workspace"), job!);
    await expect(fs.stat(sessionDir)).rejects.toThrow();
    const receipts = await h.service.purgeReceipts(tenant.scope, {
      targetType: "session",
      targetId: session.id,
    });
    expect(receipts[0]?.deleted).toMatchObject({ workspaceId, offloadFiles: 1 });
  });
});
