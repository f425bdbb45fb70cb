import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createSession } from "@/server/modules/session/session.data";
import { getWorkspace, listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { deterministicJobId } from "@/server/queue/types";
import type { Workspace } from "@/server/workspace/workspace";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { everythingMcp } from "@/test/unit/workspace/support/mcp-servers";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "./harness";
import { processBerth } from "@/server/composition/process-berth";

/**
 * A purge ends a generation of a workspace id, not the id: the sessions bound to it (and new ones of the
 * same agent/user) keep working, and the next use gets a fresh, empty workspace recorded as the next
 * generation. Real Postgres, Redis queues, in-process workers and local machines.
 */
describe("purging a workspace leaves its binding usable (issue 9 D)", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;

  beforeAll(async () => {
    h = await startWorkspaceHarness();
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await h.close();
  });

  const record = (workspaceId: string) => getWorkspace(tenant.scope, workspaceId, processBerth().db);
  const entries = async (workspace: Workspace) =>
    (await workspace.machine.list(workspace.workdir)).map((entry) => entry.name).sort();
  const markerPath = (workspace: Workspace) => path.posix.join(workspace.workdir, "old-generation.txt");

  async function purgeAndWait(workspaceId: string, reason: string) {
    const purge = await h.service.requestPurge(tenant.scope, workspaceId, { reason });
    expect(purge.jobId).toBeTruthy();
    await vi.waitFor(async () => expect((await record(workspaceId)).state).toBe("PURGED"), {
      timeout: 20_000,
    });
    return purge;
  }

  for (const isolation of ["PER_AGENT", "PER_USER", "PER_SESSION"] as const) {
    it(`${isolation}: the existing session and a new one both get generation 2, empty, with events`, async () => {
      const { agent, session, workspaceId } = await freshSession(tenant.scope, isolation);
      const first = await h.service.resolveForSession(tenant.scope, session.id);
      await first.workspace.machine.writeFile(markerPath(first.workspace), "generation 1 data");
      // A real MCP server from npm, declared (and running) in generation 1.
      await first.workspace.addMcp(everythingMcp("old"), { agentId: agent.id, sessionId: session.id });
      const before = await entries(first.workspace);
      expect(before).toContain("old-generation.txt");

      await purgeAndWait(workspaceId, `purge ${isolation}`);

      // The same session, in the same API process that had generation 1 cached.
      const again = await h.service.resolveForSession(tenant.scope, session.id);
      expect(again.workspace).not.toBe(first.workspace);
      expect(await entries(again.workspace)).not.toContain("old-generation.txt");
      expect(await again.workspace.machine.stat(markerPath(again.workspace))).toBeNull();
      expect(await again.workspace.readMcpDeclarations({ agentId: agent.id, sessionId: session.id })).toEqual(
        [],
      );
      expect(await record(workspaceId)).toMatchObject({ state: "READY", generation: 2 });

      // A new session bound the way session.create binds it (same derived id) works as well.
      const later = await createSession(tenant.scope, { agentId: agent.id, workspaceId }, processBerth().db);
      const viaNew = await h.replica().resolveForSession(tenant.scope, later.id);
      expect(await entries(viaNew.workspace)).not.toContain("old-generation.txt");

      const events = await listWorkspaceEvents(tenant.scope, workspaceId, undefined, processBerth().db);
      const kinds = events.map((event) => event.kind);
      expect(kinds).toContain("purging");
      expect(kinds).toContain("purged");
      const nextGeneration = events.find(
        (event) =>
          event.kind === "provisioning" && (event.data as { from?: string } | null)?.from === "PURGED",
      );
      expect(nextGeneration).toMatchObject({ data: { generation: 2, previousGeneration: 1 } });
      expect(nextGeneration?.reason).toMatch(/generation 2 after a purge/);
    });
  }

  it("purges the second generation too (the first generation's kept job does not swallow it)", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    await h.service.resolveForSession(tenant.scope, session.id);
    await purgeAndWait(workspaceId, "first purge");
    const second = await h.service.resolveForSession(tenant.scope, session.id);
    await second.workspace.machine.writeFile(markerPath(second.workspace), "generation 2 data");
    const purge = await purgeAndWait(workspaceId, "second purge");
    expect(purge.generation).toBe(2);
    const third = await h.service.resolveForSession(tenant.scope, session.id);
    expect(await third.workspace.machine.stat(markerPath(third.workspace))).toBeNull();
    expect((await record(workspaceId)).generation).toBe(3);
    const receipts = await h.service.purgeReceipts(tenant.scope, {
      targetType: "workspace",
      targetId: workspaceId,
    });
    expect(receipts.map((receipt) => (receipt.deleted as { generation: number }).generation).sort()).toEqual([
      1, 2,
    ]);
  });

  it("a purge racing uses from two API processes never brings the old generation's data back", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    const replicas = [h.service, h.replica()];
    for (const replica of replicas) {
      const { workspace } = await replica.resolveForSession(tenant.scope, session.id);
      await workspace.machine.writeFile(markerPath(workspace), "generation 1 data");
    }
    const purge = await h.service.requestPurge(tenant.scope, workspaceId, { reason: "racing purge" });
    const job = await h.queues
      .get("workspace")
      .getJob(deterministicJobId("workspace.purge", workspaceId, "1"));
    expect(job?.id).toBe(purge.jobId);
    // Uses keep coming while the purge runs; each either lands before the purge claimed the workspace
    // (generation 1) or waits for it and gets generation 2.
    let purgeDone = false;
    const finished = job!.waitUntilFinished(await h.queues.events("workspace"), 30_000).finally(() => {
      purgeDone = true;
    });
    const uses = replicas.map(async (replica) => {
      while (!purgeDone) await replica.resolveForSession(tenant.scope, session.id).catch(() => undefined);
    });
    expect(await finished).toMatchObject({ outcome: "purged", generation: 1 });
    await Promise.all(uses);
    for (const replica of replicas) {
      const { workspace } = await replica.resolveForSession(tenant.scope, session.id);
      expect(await workspace.machine.stat(markerPath(workspace))).toBeNull();
    }
    expect(await record(workspaceId)).toMatchObject({ state: "READY", generation: 2 });
  });
});
