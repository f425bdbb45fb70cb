/**
 * workspace.list's server-side filters (state, backend, agent by name, idle time, leases) across pages, with
 * agent names; and purge receipts naming who asked for the purge.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { processBerth } from "@/server/composition/process-berth";
import { getDb } from "@/server/db";
import { getWorkspace, upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { WORKSPACE_STATES, type WorkspaceState } from "@/server/modules/workspace/workspace.types";
import { acquireLeaseLocked, transitionFrom } from "@/server/modules/workspace/workspace-lifecycle.data";
import { startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { freshSession } from "./harness";
import { closeProcessBerth } from "@/server/composition/process-berth";

let h: AgentApiHarness;
const HOUR = 60 * 60 * 1000;
const tag = randomUUID().slice(0, 6);
/** One lifecycle step (the live transition; the table decides). */
const step = (scope: Parameters<typeof transitionFrom>[0], id: string, to: WorkspaceState) =>
  transitionFrom(scope, id, { from: WORKSPACE_STATES, to, reason: `to ${to}` }, getDb());
let agents: { alpha: { id: string; name: string }; beta: { id: string; name: string } };

beforeAll(async () => {
  h = await startAgentApiHarness("wslist");
  const scope = h.tenant.ownerScope;
  const alpha = await h.owner.agent.create({ ...h.ref, name: `alpha-${tag}`, modelConfig: { model: "m" } });
  const beta = await h.owner.agent.create({ ...h.ref, name: `beta-${tag}`, modelConfig: { model: "m" } });
  agents = { alpha, beta };
  // Six alpha workspaces idle 1..6 hours (READY), three beta ones (STOPPED), one leased alpha one.
  for (let i = 1; i <= 6; i++) {
    const id = `ws-alpha-${tag}-${i}`;
    await upsertWorkspaceBinding(
      scope,
      {
        id,
        backendKind: "local",
        isolationPolicy: "PER_AGENT",
        agentId: alpha.id,
      },
      { config: processBerth().config.quotas },
      getDb(),
    );
    await step(scope, id, "PROVISIONING");
    await step(scope, id, "READY");
    await getDb().workspace.update({
      where: { id },
      data: { lastActivityAt: new Date(Date.now() - i * HOUR) },
    });
  }
  for (let i = 1; i <= 3; i++) {
    const id = `ws-beta-${tag}-${i}`;
    await upsertWorkspaceBinding(
      scope,
      {
        id,
        backendKind: "docker",
        isolationPolicy: "PER_AGENT",
        agentId: beta.id,
      },
      { config: processBerth().config.quotas },
      getDb(),
    );
    for (const to of ["PROVISIONING", "READY", "STOPPING", "STOPPED"] as const) {
      await step(scope, id, to);
    }
  }
  await acquireLeaseLocked(
    scope,
    `ws-alpha-${tag}-1`,
    {
      holder: "turn:x",
      reason: "a turn",
      expiresAt: new Date(Date.now() + HOUR),
    },
    getDb(),
  );
});

afterAll(async () => {
  await h.close();
  await closeProcessBerth();
});

async function listAll(filters: Record<string, unknown>) {
  const ids: string[] = [];
  const names = new Set<string | null>();
  let cursor: string | undefined;
  do {
    const page = await h.owner.workspace.list({
      ...h.ref,
      ...filters,
      limit: 2,
      ...(cursor ? { cursor } : {}),
    });
    for (const item of page.items) {
      if (item.id.includes(tag)) ids.push(item.id);
      if (item.id.includes(tag)) names.add(item.agentName);
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return { ids: ids.sort(), names };
}

describe("workspace.list filters", () => {
  it("filters by state, backend, agent name, idle time and leases, page after page, with agent names", async () => {
    expect((await listAll({ states: ["STOPPED"] })).ids).toEqual([1, 2, 3].map((i) => `ws-beta-${tag}-${i}`));
    expect((await listAll({ backendKinds: ["docker"] })).ids).toHaveLength(3);
    const alpha = await listAll({ agentName: `ALPHA-${tag}` });
    expect(alpha.ids).toHaveLength(6);
    expect([...alpha.names]).toEqual([agents.alpha.name]);
    expect((await listAll({ agentId: agents.beta.id })).names).toEqual(new Set([agents.beta.name]));
    // Idle at least 3.5 hours: alpha 4, 5 and 6.
    expect((await listAll({ idleForMs: 3.5 * HOUR })).ids).toEqual(
      [4, 5, 6].map((i) => `ws-alpha-${tag}-${i}`),
    );
    expect((await listAll({ leased: true })).ids).toEqual([`ws-alpha-${tag}-1`]);
    expect((await listAll({ leased: false, agentName: `alpha-${tag}` })).ids).toHaveLength(5);
    expect((await listAll({ states: ["READY"], backendKinds: ["docker"] })).ids).toEqual([]);
  });
});

describe("purge receipts", () => {
  it("say who asked for the purge, by email", async () => {
    const { session, workspaceId } = await freshSession(h.tenant.ownerScope);
    await h.workspace.service.resolveForSession(h.tenant.ownerScope, session.id);
    await h.owner.workspace.purge({ ...h.ref, workspaceId, reason: "test purge" });
    await vi.waitFor(
      async () =>
        expect((await getWorkspace(h.tenant.ownerScope, workspaceId, getDb())).state).toBe("PURGED"),
      { timeout: 60_000, interval: 100 },
    );
    const [receipt] = await h.owner.workspace.purgeReceipts({
      ...h.ref,
      targetType: "workspace",
      targetId: workspaceId,
    });
    expect(receipt).toMatchObject({
      requestedBy: `user:${h.tenant.owner.id}`,
      requestedByName: h.tenant.owner.email,
      deleted: expect.objectContaining({ reason: "test purge", generation: 1 }),
    });
  });
});
