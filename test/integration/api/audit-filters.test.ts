/**
 * audit.list | facets | exportCsv over real Postgres: the filters (actor, action, target, outcome, time
 * range) apply on the server, across pages; actors come with their emails and key names; a failed
 * mutation's audit row gives its reason in words; the CSV export holds exactly the filtered rows.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appendAuditLog } from "@/server/modules/audit/audit.data";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import { getQueues } from "@/server/queue/queues";
import { getRedis } from "@/server/redis";
import { startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { rejectionCode } from "./support/call-by-path";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

let h: AgentApiHarness;
const DAY = 24 * 60 * 60 * 1000;
const base = new Date("2030-01-10T12:00:00.000Z");

beforeAll(async () => {
  h = await startAgentApiHarness("auditf");
  const scope = h.tenant.ownerScope;
  const user = { type: "user" as const, id: h.tenant.owner.id };
  const key = { type: "api_key" as const, id: h.tenant.adminKey.id };
  // 30 rows by the owner on three days, 5 by the admin key, 2 failures: enough to span pages.
  for (let i = 0; i < 30; i++) {
    await appendAuditLog(
      scope,
      {
        action: "agent.update",
        targetType: "agent",
        targetId: `agent-${i % 3}`,
        outcome: "success",
        actor: user,
        at: new Date(base.getTime() - (i % 3) * DAY),
      },
      processBerth().db,
    );
  }
  for (let i = 0; i < 5; i++) {
    await appendAuditLog(
      scope,
      {
        action: "session.create",
        targetType: "session",
        targetId: `session-${i}`,
        outcome: "success",
        actor: key,
        at: base,
      },
      processBerth().db,
    );
  }
  for (const at of [base, new Date(base.getTime() - 2 * DAY)]) {
    await appendAuditLog(
      scope,
      {
        action: "workspace.stop",
        targetType: "workspace",
        targetId: "ws-1",
        outcome: "failure",
        actor: user,
        details: { code: "CONFLICT", error: "The workspace is in use; pass force to stop it anyway." },
        at,
      },
      processBerth().db,
    );
  }
});

afterAll(async () => {
  await h.close();
  await closeProcessBerth();
});

describe("audit filters, names and export", () => {
  it("filters by actor, action, target, outcome and time range on the server, across pages", async () => {
    const all = async (filters: Record<string, unknown>) => {
      const seen: { id: string; actorId: string | null }[] = [];
      let cursor: string | undefined;
      do {
        const page = await h.owner.audit.list({
          ...h.ref,
          ...filters,
          limit: 7,
          ...(cursor ? { cursor } : {}),
        });
        seen.push(...page.items);
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      return seen;
    };
    expect(await all({ action: "agent.update" })).toHaveLength(30);
    expect(await all({ actorType: "api_key", actorId: h.tenant.adminKey.id })).toHaveLength(5);
    expect(await all({ targetType: "agent", targetId: "agent-1" })).toHaveLength(10);
    expect(await all({ outcome: "failure" })).toHaveLength(2);
    // The day of `base` only: 10 owner updates, 5 key sessions, 1 failure.
    const sameDay = { from: new Date(base.getTime() - 60_000), to: new Date(base.getTime() + 60_000) };
    expect(await all(sameDay)).toHaveLength(16);
    expect(await all({ ...sameDay, outcome: "failure", action: "workspace.stop" })).toHaveLength(1);
    expect(await all({ action: "no.such.action" })).toHaveLength(0);
  });

  it("names actors (email, key name) and gives a failure's reason", async () => {
    const page = await h.owner.audit.list({ ...h.ref, outcome: "failure", limit: 1 });
    expect(page.items[0]).toMatchObject({
      actorName: h.tenant.owner.email,
      reason: "The workspace is in use; pass force to stop it anyway.",
    });
    const byKey = await h.owner.audit.list({ ...h.ref, actorType: "api_key", limit: 1 });
    expect(byKey.items[0]?.actorName).toBe("key admin key");

    // A real failed mutation: its audit row carries the message the caller got, not only a code.
    expect(
      await rejectionCode(
        h.owner.agent.update({ ...h.ref, agentId: "missing-agent", patch: { description: "x" } }),
      ),
    ).toBe("NOT_FOUND");
    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getQueues().redisPrefix,
    });
    const failed = await h.owner.audit.list({ ...h.ref, action: "agent.update", targetId: "missing-agent" });
    expect(failed.items).toHaveLength(1);
    expect(failed.items[0]).toMatchObject({ outcome: "failure", actorName: h.tenant.owner.email });
    expect(failed.items[0]?.reason).toMatch(/not found/i);
  });

  it("offers the log's actions and named actors as facets", async () => {
    const facets = await h.owner.audit.facets(h.ref);
    expect(facets.actions).toEqual(
      expect.arrayContaining(["agent.update", "session.create", "workspace.stop"]),
    );
    expect(facets.targetTypes).toEqual(expect.arrayContaining(["agent", "session", "workspace"]));
    expect(facets.actors).toEqual(
      expect.arrayContaining([
        { type: "user", id: h.tenant.owner.id, name: h.tenant.owner.email },
        { type: "api_key", id: h.tenant.adminKey.id, name: "key admin key" },
      ]),
    );
  });

  it("exports exactly the filtered rows as CSV, and only to admins", async () => {
    const exported = await h.owner.audit.exportCsv({ ...h.ref, action: "agent.update", targetId: "agent-2" });
    expect(exported).toMatchObject({ rows: 10, truncated: false });
    const lines = exported.csv.trim().split("\r\n");
    expect(lines).toHaveLength(11);
    expect(
      lines.slice(1).every((line) => line.includes(",agent.update,") && line.includes(",agent-2,")),
    ).toBe(true);
    expect(lines[1]).toContain(h.tenant.owner.email);
    expect(await rejectionCode(h.viewer.audit.exportCsv(h.ref))).toBe("FORBIDDEN");
    expect(await rejectionCode(h.viewer.audit.list(h.ref))).toBe("FORBIDDEN");
  });
});
