import { beforeAll, describe, expect, it } from "vitest";
import { processBerth } from "@/server/composition/process-berth";
import { getDb } from "@/server/db";
import {
  getWorkspace,
  listWorkspaceEvents,
  listWorkspaceLeases,
  releaseWorkspaceLease,
  upsertWorkspaceBinding,
} from "@/server/modules/workspace/workspace.data";
import { listWorkspaces } from "@/server/modules/workspace/workspace-list.data";
import {
  acquireLeaseLocked,
  findSweepCandidates,
  stopIfIdle,
  touchWorkspaceActivity,
  transitionFrom,
} from "@/server/modules/workspace/workspace-lifecycle.data";
import {
  WORKSPACE_STATES,
  WORKSPACE_TRANSITIONS,
  type WorkspaceState,
} from "@/server/modules/workspace/workspace.types";
import { createTestTenant, expectAppError, uniqueSlug, type TestTenant } from "./fixtures";

/** The one lifecycle: the live transition (`transitionFrom`) enforces WORKSPACE_TRANSITIONS. */
describe("workspace bindings and their state machine", () => {
  let t: TestTenant;
  beforeAll(async () => {
    t = await createTestTenant();
  });

  /** One step from whatever state the workspace is in (the table decides whether it may happen). */
  async function step(
    id: string,
    to: WorkspaceState,
    extra: Partial<Parameters<typeof transitionFrom>[2]> = {},
  ) {
    await transitionFrom(t.scope, id, { from: WORKSPACE_STATES, to, reason: `to ${to}`, ...extra }, getDb());
    return getWorkspace(t.scope, id, getDb());
  }
  const lease = (holder: string, reason = "test", expiresAt = new Date(Date.now() + 600_000)) => ({
    holder,
    reason,
    expiresAt,
  });

  async function newWorkspace(): Promise<string> {
    const id = uniqueSlug("ws");
    const { created } = await upsertWorkspaceBinding(
      t.scope,
      {
        id,
        backendKind: "docker",
        isolationPolicy: "PER_SESSION",
      },
      { config: processBerth().config.quotas },
      getDb(),
    );
    expect(created).toBe(true);
    return id;
  }

  /** Drives a fresh workspace into `state` along legal transitions. */
  async function workspaceIn(state: WorkspaceState): Promise<string> {
    const id = await newWorkspace();
    const path: Record<WorkspaceState, WorkspaceState[]> = {
      PENDING: [],
      PROVISIONING: ["PROVISIONING"],
      READY: ["PROVISIONING", "READY"],
      STOPPING: ["PROVISIONING", "READY", "STOPPING"],
      STOPPED: ["PROVISIONING", "READY", "STOPPING", "STOPPED"],
      PURGING: ["PURGING"],
      PURGED: ["PURGING", "PURGED"],
      FAILED: ["FAILED"],
    };
    for (const to of path[state]) await step(id, to, { error: "boom" });
    return id;
  }

  it("upsert is idempotent and records one `created` event", async () => {
    const id = await newWorkspace();
    const again = await upsertWorkspaceBinding(
      t.scope,
      {
        id,
        backendKind: "e2b",
        isolationPolicy: "PER_USER",
      },
      { config: processBerth().config.quotas },
      getDb(),
    );
    expect(again.created).toBe(false);
    expect(again.workspace).toMatchObject({
      id,
      backendKind: "docker",
      isolationPolicy: "PER_SESSION",
      state: "PENDING",
    });
    expect((await listWorkspaceEvents(t.scope, id, undefined, getDb())).map((e) => e.kind)).toEqual([
      "created",
    ]);
  });

  it("walks the full lifecycle and writes a ledger entry per step", async () => {
    const id = await newWorkspace();
    await step(id, "PROVISIONING", { reason: "first turn" });
    const ready = await step(id, "READY", { backendHandle: { containerId: "c1" } });
    expect(ready).toMatchObject({ state: "READY", backendHandle: { containerId: "c1" }, error: null });
    expect(ready.lastActivityAt).toBeInstanceOf(Date);
    await transitionFrom(t.scope, id, { from: ["READY"], to: "STOPPING", reason: "idle 1h" }, getDb());
    await step(id, "STOPPED");
    await step(id, "PROVISIONING", { reason: "resume" });
    await step(id, "FAILED", { error: "image pull failed" });
    expect((await getWorkspace(t.scope, id, getDb())).error).toBe("image pull failed");
    await step(id, "PURGING", { reason: "agent deleted" });
    const purged = await step(id, "PURGED", { backendHandle: null, reason: "agent deleted" });
    expect(purged).toMatchObject({ state: "PURGED", backendHandle: null, error: null, generation: 1 });
    const next = await step(id, "PROVISIONING", { reason: "next use" });
    expect(next).toMatchObject({ state: "PROVISIONING", generation: 2 });

    const events = await listWorkspaceEvents(t.scope, id, undefined, getDb());
    expect(events.map((e) => e.kind).reverse()).toEqual([
      "created",
      "provisioning",
      "provisioned",
      "stopping",
      "stopped",
      "provisioning",
      "failed",
      "purging",
      "purged",
      "provisioning",
    ]);
    expect(events[0]).toMatchObject({ data: { from: "PURGED", generation: 2, previousGeneration: 1 } });
    const stopping = events.find((e) => e.kind === "stopping");
    expect(stopping).toMatchObject({
      reason: "idle 1h",
      actor: `user:${t.owner.id}`,
      data: { from: "READY", to: "STOPPING" },
    });
  });

  it("rejects every transition the table does not allow with CONFLICT, leaving the state unchanged", async () => {
    for (const from of WORKSPACE_STATES) {
      const illegal = WORKSPACE_STATES.filter(
        (to) => to !== "PENDING" && !WORKSPACE_TRANSITIONS[from].includes(to),
      );
      if (illegal.length === 0) continue;
      const id = await workspaceIn(from);
      // Even a caller that names the current state as allowed cannot leave the table.
      for (const to of illegal) await expectAppError(step(id, to), "CONFLICT");
      expect((await getWorkspace(t.scope, id, getDb())).state).toBe(from);
    }
  });

  it("rejects a transition from a state the caller did not expect", async () => {
    const id = await workspaceIn("READY");
    await expectAppError(
      transitionFrom(t.scope, id, { from: ["PROVISIONING"], to: "STOPPING", reason: "stale" }, getDb()),
      "CONFLICT",
    );
    expect((await getWorkspace(t.scope, id, getDb())).state).toBe("READY");
  });

  it("lets exactly one of two concurrent identical transitions win (e.g. two reapers stopping)", async () => {
    const id = await workspaceIn("READY");
    const results = await Promise.allSettled([
      transitionFrom(t.scope, id, { from: ["READY"], to: "STOPPING", reason: "sweep a" }, getDb()),
      transitionFrom(t.scope, id, { from: ["READY"], to: "STOPPING", reason: "sweep b" }, getDb()),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const rejected = results.find((r) => r.status === "rejected");
    expect((rejected as PromiseRejectedResult).reason).toMatchObject({ name: "AppError", code: "CONFLICT" });
    expect((await listWorkspaceEvents(t.scope, id, { kinds: ["stopping"] }, getDb())).length).toBe(1);
  });

  it("leases keep the workspace from the sweep, activity moves the idle clock, expired leases do not count", async () => {
    const id = await workspaceIn("READY");
    await getDb().workspace.updateMany({
      where: { id },
      data: { lastActivityAt: new Date(Date.now() - 3_600_000) },
    });
    const idleBefore = new Date(Date.now() - 60_000);
    const leaseBornAfter = new Date(Date.now() - 3_600_000);
    expect((await findSweepCandidates({ idleBefore, limit: 500 }, getDb())).map((w) => w.id)).toContain(id);

    await acquireLeaseLocked(t.scope, id, lease("turn:42", "running a turn"), getDb());
    await acquireLeaseLocked(t.scope, id, lease("turn:42", "renewed"), getDb());
    expect((await getWorkspace(t.scope, id, getDb())).activeLeases).toBe(1);
    expect((await listWorkspaceLeases(t.scope, id, getDb()))[0]).toMatchObject({
      holder: "turn:42",
      reason: "renewed",
    });
    // Taking the lease moved the idle clock; pushed back again, the sweep still sees the live lease.
    await getDb().workspace.updateMany({ where: { id }, data: { lastActivityAt: new Date(0) } });
    expect(await stopIfIdle(t.scope, id, { idleBefore, leaseBornAfter, reason: "idle" }, getDb())).toEqual({
      outcome: "leased",
      holders: ["turn:42"],
    });

    expect(await releaseWorkspaceLease(t.scope, id, "turn:42", getDb())).toBe(true);
    expect(await releaseWorkspaceLease(t.scope, id, "turn:42", getDb())).toBe(false);
    await acquireLeaseLocked(t.scope, id, lease("crashed", "gone", new Date(Date.now() - 1000)), getDb());
    expect((await getWorkspace(t.scope, id, getDb())).activeLeases).toBe(0);

    await touchWorkspaceActivity(t.scope, id, new Date(), getDb());
    expect((await findSweepCandidates({ idleBefore, limit: 500 }, getDb())).map((w) => w.id)).not.toContain(
      id,
    );
    await getDb().workspace.updateMany({ where: { id }, data: { lastActivityAt: new Date(0) } });
    expect(
      await stopIfIdle(t.scope, id, { idleBefore, leaseBornAfter, reason: "idle 1h" }, getDb()),
    ).toMatchObject({
      outcome: "stopping",
    });
    expect((await getWorkspace(t.scope, id, getDb())).state).toBe("STOPPING");
    const kinds = (
      await listWorkspaceEvents(t.scope, id, { kinds: ["lease_acquired", "lease_released"] }, getDb())
    ).map((e) => e.kind);
    expect(kinds.filter((k) => k === "lease_released")).toHaveLength(1);
  });

  it("leases a purged workspace (its next use provisions it again) unless told not to, and filters lists by state", async () => {
    const id = await workspaceIn("PURGED");
    await acquireLeaseLocked(t.scope, id, lease("late"), getDb());
    expect(await releaseWorkspaceLease(t.scope, id, "late", getDb())).toBe(true);
    await expectAppError(
      acquireLeaseLocked(t.scope, id, lease("scope-purge"), getDb(), { refuseStates: ["PURGED"] }),
      "CONFLICT",
    );
    const purged = await listWorkspaces(t.scope, { states: ["PURGED"], limit: 200 }, getDb());
    expect(purged.items.every((w) => w.state === "PURGED")).toBe(true);
    expect(purged.items.map((w) => w.id)).toContain(id);
  });
});
