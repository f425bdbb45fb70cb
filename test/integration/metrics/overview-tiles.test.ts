import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { createAgent } from "@/server/modules/agent/agent.data";
import { createJobsService } from "@/server/modules/jobs/jobs.service";
import { insertUsageRecords } from "@/server/modules/metering/metering.data";
import type { UsageKind } from "@/server/modules/metering/metering.types";
import { gettingStarted, overviewTrends } from "@/server/modules/metrics/overview-trends.service";
import { tenantUsageOverview } from "@/server/modules/metrics/usage-overview.service";
import { getDb } from "@/server/db";
import { addTestMember, createTestTenant, type TestTenant } from "../db/fixtures";
import { isolatedRedisConfig, openTestQueues } from "../queue/queue-fixtures";
import { processBerth } from "@/server/composition/process-berth";

const DAY = 86_400_000;
const HOUR = 3_600_000;

describe("the Overview's tiles: tokens per day, top agents (the ledger) and the tenant's queue depth", () => {
  let tenant: TestTenant;
  let other: TestTenant;
  const key = secretKeyFromBytes(randomBytes(32));
  const agentOf = (t: TestTenant, name: string) =>
    createAgent(
      t.scope,
      { name, modelConfig: { provider: "openai", model: "test" } },
      key,
      processBerth().db,
    );

  beforeAll(async () => {
    tenant = await createTestTenant();
    other = await createTestTenant();
  });

  it("sums input and output tokens per UTC day (zero-filled) and ranks agents by tokens, then turns", async () => {
    const today = Math.floor(Date.now() / DAY) * DAY;
    const now = today + 12 * 3_600_000;
    const [busy, chatty, quiet] = await Promise.all(
      ["busy", "chatty", "quiet"].map((name) => agentOf(tenant, name)),
    );
    const theirs = await agentOf(other, "theirs");
    const entry = (t: TestTenant, agentId: string | null, kind: UsageKind, quantity: number, at: number) => ({
      id: randomUUID(),
      tenantId: t.tenantId,
      kind,
      quantity,
      backend: null,
      size: null,
      agentId,
      sessionId: null,
      userId: null,
      workspaceId: null,
      at: new Date(at),
    });
    await insertUsageRecords(
      [
        entry(tenant, busy!.id, "input_tokens", 1_000, today + 3_600_000),
        entry(tenant, busy!.id, "output_tokens", 200, today + 3_600_000),
        entry(tenant, busy!.id, "turn", 1, today + 3_600_000),
        entry(tenant, chatty!.id, "input_tokens", 300, today - DAY + 60_000),
        entry(tenant, chatty!.id, "turn", 5, today - DAY + 60_000),
        entry(tenant, quiet!.id, "turn", 1, today - 2 * DAY),
        // 20 days ago: outside both windows. Another tenant's and a workspace-second: never counted.
        entry(tenant, quiet!.id, "input_tokens", 50_000, today - 20 * DAY),
        entry(other, theirs.id, "input_tokens", 9_999, today),
        entry(tenant, busy!.id, "workspace_seconds", 7_777, today),
      ],
      processBerth().db,
    );
    const view = await tenantUsageOverview(tenant.scope, now, processBerth().db);
    expect(view.tokensPerDay).toHaveLength(14);
    expect(view.tokensPerDay.at(-1)).toEqual({ at: new Date(today), input: 1_000, output: 200 });
    expect(view.tokensPerDay.at(-2)).toEqual({ at: new Date(today - DAY), input: 300, output: 0 });
    expect(view.tokensPerDay.at(0)).toEqual({ at: new Date(today - 13 * DAY), input: 0, output: 0 });
    expect(view.topAgents).toEqual([
      { agentId: busy!.id, name: "busy", turns: 1, tokens: 1_200 },
      { agentId: chatty!.id, name: "chatty", turns: 5, tokens: 300 },
      { agentId: quiet!.id, name: "quiet", turns: 1, tokens: 0 },
    ]);
  });

  it("replays workspaces by state per hour from the event ledger and counts failed turns per day", async () => {
    const fresh = await createTestTenant();
    const db = getDb();
    const hour = Math.floor(Date.now() / HOUR) * HOUR;
    const today = Math.floor(Date.now() / DAY) * DAY;
    const workspace = async (events: Array<[string, number]>) => {
      const id = `w${randomBytes(6).toString("hex")}`;
      await db.workspace.create({
        data: { id, tenantId: fresh.tenantId, backendKind: "local", isolationPolicy: "PER_AGENT" },
      });
      await db.workspaceEvent.createMany({
        data: events.map(([kind, at]) => ({
          tenantId: fresh.tenantId,
          workspaceId: id,
          kind: kind as "created",
          actor: "system:test",
          at: new Date(at),
        })),
      });
      return id;
    };
    // One READY since three hours ago (a lease event changes no state); one READY two hours ago, then stopped.
    const ready = await workspace([
      ["created", hour - 3 * HOUR + 60_000],
      ["provisioning", hour - 3 * HOUR + 120_000],
      ["provisioned", hour - 3 * HOUR + 180_000],
      ["lease_acquired", hour - HOUR],
    ]);
    await workspace([
      ["created", hour - 2 * HOUR + 60_000],
      ["provisioned", hour - 2 * HOUR + 120_000],
      ["stopping", hour - HOUR + 60_000],
      ["stopped", hour - HOUR + 120_000],
    ]);
    const agent = await agentOf(fresh, "a");
    const session = await db.session.create({
      data: { tenantId: fresh.tenantId, agentId: agent.id, workspaceId: ready },
    });
    const turn = (status: "FAILED" | "INTERRUPTED" | "COMPLETED", at: number) => ({
      tenantId: fresh.tenantId,
      sessionId: session.id,
      status,
      ownerId: "test",
      userMessage: "hi",
      startedAt: new Date(at),
    });
    await db.chatTurn.createMany({
      data: [
        turn("FAILED", today + 60_000),
        turn("FAILED", today + 120_000),
        turn("INTERRUPTED", today - DAY + 60_000),
        turn("COMPLETED", today + 60_000),
        turn("FAILED", today - 20 * DAY),
      ],
    });

    const view = await overviewTrends(fresh.scope, hour + 30 * 60_000, processBerth().db);
    const zero = { ready: 0, provisioning: 0, stopped: 0, failed: 0, purged: 0 };
    expect(view.workspaceStates).toHaveLength(24);
    expect(view.workspaceStates.slice(-5)).toEqual([
      { at: new Date(hour - 4 * HOUR), ...zero },
      { at: new Date(hour - 3 * HOUR), ...zero, ready: 1 },
      { at: new Date(hour - 2 * HOUR), ...zero, ready: 2 },
      { at: new Date(hour - HOUR), ...zero, ready: 1, stopped: 1 },
      { at: new Date(hour), ...zero, ready: 1, stopped: 1 },
    ]);
    expect(view.failedTurns).toHaveLength(14);
    expect(view.failedTurns.slice(-2)).toEqual([
      { at: new Date(today - DAY), failed: 0, interrupted: 1 },
      { at: new Date(today), failed: 2, interrupted: 0 },
    ]);
    // Another tenant sees none of it.
    const theirs = await overviewTrends(other.scope, hour + 30 * 60_000, processBerth().db);
    expect(theirs.workspaceStates.every((b) => b.ready + b.stopped === 0)).toBe(true);
    expect(theirs.failedTurns.every((b) => b.failed + b.interrupted === 0)).toBe(true);
  });

  it("checks each getting-started step from the tenant's data", async () => {
    const fresh = await createTestTenant();
    const db = getDb();
    const done = async () =>
      Object.fromEntries(
        (await gettingStarted(fresh.scope, processBerth().db)).steps.map((step) => [step.id, step.done]),
      );
    expect(await gettingStarted(fresh.scope, processBerth().db)).toMatchObject({ complete: false });
    expect(await done()).toEqual({
      agent: false,
      model: false,
      session: false,
      message: false,
      teammate: false,
    });
    const agent = await agentOf(fresh, "a");
    const session = await db.session.create({
      data: { tenantId: fresh.tenantId, agentId: agent.id, workspaceId: "w-none" },
    });
    await db.chatMessage.create({
      data: { tenantId: fresh.tenantId, sessionId: session.id, role: "user", content: "hello" },
    });
    // An agent without a key: the model step waits for a completed turn (a keyless local model).
    expect(await done()).toEqual({
      agent: true,
      model: false,
      session: true,
      message: true,
      teammate: false,
    });
    await db.chatTurn.create({
      data: {
        tenantId: fresh.tenantId,
        sessionId: session.id,
        status: "COMPLETED",
        ownerId: "test",
        userMessage: "hello",
      },
    });
    await addTestMember(fresh, "member");
    expect(await gettingStarted(fresh.scope, processBerth().db)).toMatchObject({ complete: true });
  });

  describe("queue depth", () => {
    const { queues, connection } = openTestQueues(isolatedRedisConfig());
    afterAll(async () => {
      await queues.close();
      connection.disconnect();
    });

    it("counts the tenant's waiting, delayed and failed jobs per queue, never another tenant's", async () => {
      const main = queues.all().find((queue) => queue.name === "test-main")!;
      // No worker runs on these queues: what is added stays where it was put.
      await main.add("test.echo", { tenantId: tenant.tenantId, itemId: "a" });
      await main.add("test.echo", { tenantId: tenant.tenantId, itemId: "b" });
      await main.add("test.echo", { tenantId: tenant.tenantId, itemId: "c" }, { delay: 3_600_000 });
      await main.add("test.echo", { tenantId: other.tenantId, itemId: "d" });
      await main.add("test.echo", { itemId: "system" });
      const depth = await createJobsService(queues, processBerth().audit).depth(tenant.scope);
      expect(depth.find((row) => row.queue === "test-main")).toEqual({
        queue: "test-main",
        waiting: 2,
        active: 0,
        delayed: 1,
        failed: 0,
        capped: false,
      });
      expect(depth.find((row) => row.queue === "test-slow")).toMatchObject({ waiting: 0, delayed: 0 });
      expect(
        (await createJobsService(queues, processBerth().audit).depth(other.scope)).find(
          (r) => r.queue === "test-main",
        ),
      ).toMatchObject({ waiting: 1, delayed: 0 });
    });
  });
});
