import { beforeAll, describe, expect, it } from "vitest";
import { getDb } from "@/server/db";
import {
  acquireWorkspaceLease,
  bumpWorkspaceActivity,
  findIdleWorkspacesForReaper,
  getWorkspace,
  listWorkspaceEvents,
  listWorkspaceLeases,
  releaseWorkspaceLease,
  transitionWorkspace,
  upsertWorkspaceBinding,
} from "@/server/modules/workspace/workspace.data";
import { listWorkspaces } from "@/server/modules/workspace/workspace-list.data";
import {
  WORKSPACE_STATES,
  WORKSPACE_TRANSITIONS,
  type WorkspaceState,
} from "@/server/modules/workspace/workspace.types";
import { createTestTenant, expectAppError, uniqueSlug, type TestTenant } from "./fixtures";

describe("workspace bindings and their state machine", () => {
  let t: TestTenant;
  beforeAll(async () => {
    t = await createTestTenant();
  });

  async function newWorkspace(): Promise<string> {
    const id = uniqueSlug("ws");
    const { created } = await upsertWorkspaceBinding(t.scope, {
      id,
      backendKind: "docker",
      isolationPolicy: "PER_SESSION",
    });
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
    for (const to of path[state])
      await transitionWorkspace(t.scope, id, { to: to as Exclude<WorkspaceState, "PENDING">, error: "boom" });
    return id;
  }

  it("upsert is idempotent and records one `created` event", async () => {
    const id = await newWorkspace();
    const again = await upsertWorkspaceBinding(t.scope, {
      id,
      backendKind: "e2b",
      isolationPolicy: "PER_USER",
    });
    expect(again.created).toBe(false);
    expect(again.workspace).toMatchObject({
      id,
      backendKind: "docker",
      isolationPolicy: "PER_SESSION",
      state: "PENDING",
    });
    expect((await listWorkspaceEvents(t.scope, id)).map((e) => e.kind)).toEqual(["created"]);
  });

  it("walks the full lifecycle and writes a ledger entry per step", async () => {
    const id = await newWorkspace();
    await transitionWorkspace(t.scope, id, { to: "PROVISIONING", reason: "first turn" });
    const ready = await transitionWorkspace(t.scope, id, {
      to: "READY",
      backendHandle: { containerId: "c1" },
    });
    expect(ready).toMatchObject({ state: "READY", backendHandle: { containerId: "c1" }, error: null });
    expect(ready.lastActivityAt).toBeInstanceOf(Date);
    await transitionWorkspace(t.scope, id, { to: "STOPPING", expectedFrom: "READY", reason: "idle 1h" });
    await transitionWorkspace(t.scope, id, { to: "STOPPED" });
    await transitionWorkspace(t.scope, id, { to: "PROVISIONING", reason: "resume" });
    await transitionWorkspace(t.scope, id, { to: "FAILED", error: "image pull failed" });
    expect((await getWorkspace(t.scope, id)).error).toBe("image pull failed");
    await transitionWorkspace(t.scope, id, { to: "PURGING", reason: "agent deleted" });
    const purged = await transitionWorkspace(t.scope, id, {
      to: "PURGED",
      backendHandle: null,
      reason: "agent deleted",
    });
    expect(purged).toMatchObject({ state: "PURGED", backendHandle: null, error: null, generation: 1 });
    const next = await transitionWorkspace(t.scope, id, { to: "PROVISIONING", reason: "next use" });
    expect(next).toMatchObject({ state: "PROVISIONING", generation: 2 });

    const events = await listWorkspaceEvents(t.scope, id);
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
      for (const to of illegal) {
        await expectAppError(
          transitionWorkspace(t.scope, id, { to: to as Exclude<WorkspaceState, "PENDING"> }),
          "CONFLICT",
        );
      }
      expect((await getWorkspace(t.scope, id)).state).toBe(from);
    }
  });

  it("rejects a transition whose expectedFrom does not match", async () => {
    const id = await workspaceIn("READY");
    await expectAppError(
      transitionWorkspace(t.scope, id, { to: "STOPPING", expectedFrom: "PROVISIONING" }),
      "CONFLICT",
    );
    expect((await getWorkspace(t.scope, id)).state).toBe("READY");
  });

  it("lets exactly one of two concurrent identical transitions win (e.g. two reapers stopping)", async () => {
    const id = await workspaceIn("READY");
    const results = await Promise.allSettled([
      transitionWorkspace(t.scope, id, { to: "STOPPING", reason: "reaper a" }),
      transitionWorkspace(t.scope, id, { to: "STOPPING", reason: "reaper b" }),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const rejected = results.find((r) => r.status === "rejected");
    expect((rejected as PromiseRejectedResult).reason).toMatchObject({ name: "AppError", code: "CONFLICT" });
    expect((await listWorkspaceEvents(t.scope, id, { kinds: ["stopping"] })).length).toBe(1);
  });

  it("bumps activity with a reason, and leases keep the workspace out of the reaper's list", async () => {
    const id = await workspaceIn("READY");
    await getDb().workspace.updateMany({
      where: { id },
      data: { lastActivityAt: new Date(Date.now() - 3_600_000) },
    });
    const idleBefore = new Date(Date.now() - 60_000);
    expect((await findIdleWorkspacesForReaper({ idleBefore, limit: 200 })).map((w) => w.id)).toContain(id);

    await acquireWorkspaceLease(t.scope, id, { holder: "turn:42", reason: "running a turn" });
    await acquireWorkspaceLease(t.scope, id, { holder: "turn:42", reason: "renewed" });
    expect((await getWorkspace(t.scope, id)).activeLeases).toBe(1);
    expect((await listWorkspaceLeases(t.scope, id))[0]).toMatchObject({
      holder: "turn:42",
      reason: "renewed",
    });
    expect((await findIdleWorkspacesForReaper({ idleBefore, limit: 200 })).map((w) => w.id)).not.toContain(
      id,
    );

    expect(await releaseWorkspaceLease(t.scope, id, "turn:42")).toBe(true);
    expect(await releaseWorkspaceLease(t.scope, id, "turn:42")).toBe(false);
    await acquireWorkspaceLease(t.scope, id, { holder: "crashed", expiresAt: new Date(Date.now() - 1000) });
    expect((await getWorkspace(t.scope, id)).activeLeases).toBe(0);

    await bumpWorkspaceActivity(t.scope, id, "file upload");
    expect((await findIdleWorkspacesForReaper({ idleBefore, limit: 200 })).map((w) => w.id)).not.toContain(
      id,
    );
    const kinds = (
      await listWorkspaceEvents(t.scope, id, { kinds: ["bumped", "lease_acquired", "lease_released"] })
    ).map((e) => [e.kind, e.reason]);
    expect(kinds[0]).toEqual(["bumped", "file upload"]);
    expect(kinds.filter(([k]) => k === "lease_released")).toHaveLength(1);
  });

  it("leases a purged workspace (its next use provisions it again) and filters lists by state", async () => {
    const id = await workspaceIn("PURGED");
    await acquireWorkspaceLease(t.scope, id, { holder: "late" });
    expect(await releaseWorkspaceLease(t.scope, id, "late")).toBe(true);
    await expectAppError(bumpWorkspaceActivity(t.scope, id, "late"), "NOT_FOUND");
    const purged = await listWorkspaces(t.scope, { states: ["PURGED"], limit: 200 });
    expect(purged.items.every((w) => w.state === "PURGED")).toBe(true);
    expect(purged.items.map((w) => w.id)).toContain(id);
  });
});
