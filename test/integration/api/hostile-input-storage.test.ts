/**
 * Hostile strings that get past the boundary (a service called directly, an entry buffered by an older
 * release) must not break storage for anyone: the audit buffer sanitises, and sets aside what it cannot
 * store, through the real `audit.flush` job on real Redis and Postgres; chat.send stores a message it
 * cannot store as it is made storable (U+FFFD) and runs the turn.
 */
import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { loadRedisConfig } from "@/server/config/redis";
import { getDb } from "@/server/db";
import { auditDeadLetters } from "@/server/modules/audit/audit-buffer.service";
import { checkHealth } from "@/server/modules/health/health.service";
import { createRedisConnection, redisKey } from "@/server/redis";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { startWorkerRuntime, type WorkerRuntime } from "@/workers/runtime";
import { startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { testLog } from "../queue/queue-fixtures";
import { createTenantFixture, type TenantFixture } from "./support/tenant-fixtures";
import { processBerth } from "@/server/composition/process-berth";

let h: AgentApiHarness;
let other: TenantFixture;
let fake: FakeModelServer;
let redis: Redis;
let workers: WorkerRuntime;
const redisConfig = loadRedisConfig();

/** The process-wide workers, as `npm start` runs them next to the API (the audit buffer's queue). */
const startWorkers = () =>
  startWorkerRuntime({
    redis: redisConfig,
    workers: { concurrency: 2, healthPort: 0, heartbeatTtlMs: 15_000 },
    log: testLog,
    healthPort: null,
    schedules: [],
  });

beforeAll(async () => {
  h = await startAgentApiHarness("his");
  other = await createTenantFixture(h.runtime, "hio");
  fake = await startFakeModel({ apiKey: "sk-hostile" });
  redis = createRedisConnection(redisConfig, "producer", "test-hostile-storage");
  workers = await startWorkers();
});

afterAll(async () => {
  await workers.stop();
  await redis.quit();
  await fake.close();
  await h.close();
});

const auditRows = (tenantId: string, action: string) =>
  getDb().auditLog.findMany({ where: { tenantId, action }, orderBy: { at: "asc" } });

describe("the audit buffer under hostile strings", () => {
  it("an audited call with a NUL, an entry buffered before the fix and a corrupt one block no tenant's audit", async () => {
    const scope = h.tenant.ownerScope;
    // What an older release buffered for `chat.cancel({ sessionId: "x\0y" })`: the batch every flush
    // retried forever, across restarts, while no audit row landed for any tenant.
    const legacy = JSON.stringify({
      id: randomUUID(),
      tenantId: scope.tenantId,
      actorType: "user",
      actorId: h.tenant.owner.id,
      action: "legacy.cancel",
      targetType: "session",
      targetId: "x\u0000y",
      outcome: "failure",
      details: { "k\u0000": "\uD800" },
      at: new Date().toISOString(),
    });
    await redis.rpush(redisKey(redisConfig.prefix, "audit", "buffer"), legacy, "{not json");
    const deadBefore = (await auditDeadLetters(redis, redisConfig.prefix)).total;

    // The service itself (no HTTP boundary in front, which answers 400): the failed cancel is audited
    // with the target id it was given.
    await expect(processBerth().agents.chat.cancel(scope, "x\u0000y")).rejects.toThrow();
    await processBerth().audit.record(other.ownerScope, { action: "other.tenant", outcome: "success" });

    await vi.waitFor(
      async () => {
        expect(await auditRows(other.tenant.id, "other.tenant")).toHaveLength(1);
        expect(await auditRows(scope.tenantId, "chat.cancel")).toHaveLength(1);
        expect(await auditRows(scope.tenantId, "legacy.cancel")).toHaveLength(1);
      },
      { timeout: 20_000, interval: 100 },
    );
    const [cancel] = await auditRows(scope.tenantId, "chat.cancel");
    expect(cancel).toMatchObject({ targetId: "x\uFFFDy", outcome: "failure" });
    const [old] = await auditRows(scope.tenantId, "legacy.cancel");
    expect(old).toMatchObject({ targetId: "x\uFFFDy", details: { "k\uFFFD": "\uFFFD" } });

    // The corrupt line is set aside, counted, and visible to an operator in the health report.
    const dead = await auditDeadLetters(redis, redisConfig.prefix);
    expect(dead.total).toBe(deadBefore + 1);
    expect(dead.newest.at(-1)).toMatchObject({
      entry: "{not json",
      reason: expect.stringMatching(/^unreadable/),
    });
    const health = await checkHealth({
      db: processBerth().db,
      redis,
      redisPrefix: redisConfig.prefix,
      heartbeatTtlMs: 15_000,
    });
    expect(health.checks.audit).toMatchObject({ ok: true, pending: 0, deadLettered: deadBefore + 1 });

    // After a restart of the workers the buffer still flows.
    await workers.stop();
    workers = await startWorkers();
    await processBerth().audit.record(scope, { action: "after.restart", outcome: "success" });
    await vi.waitFor(async () => expect(await auditRows(scope.tenantId, "after.restart")).toHaveLength(1), {
      timeout: 20_000,
      interval: 100,
    });
  });
});

describe("chat.send with a message storage cannot take", () => {
  it("stores the message made storable and runs the turn: never a failure, never the database's text", async () => {
    const agent = await h.owner.agent.create({
      ...h.ref,
      name: `hostile-chat-${randomUUID().slice(0, 8)}`,
      modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-hostile" },
    });
    const { sessionId } = await h.owner.session.create({ ...h.ref, agentId: agent.id });
    // Past the HTTP boundary (which answers 400): a service called directly. The claim stores the user's
    // message, which Postgres would refuse with its NUL: it is stored with U+FFFD instead, and the turn
    // runs (bytes Postgres cannot store may come from anywhere and must never fail a turn).
    fake.enqueue({ kind: "text", text: "Heard you." });
    const events = [];
    for await (const event of await processBerth().agents.chat.send(h.tenant.ownerScope, {
      sessionId,
      message: "hi\u0000there",
    }))
      events.push(event);
    expect(events.filter((event) => event.type === "error")).toEqual([]);
    expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
    expect((await h.owner.session.get({ ...h.ref, sessionId })).status).toBe("IDLE");
    const history = JSON.stringify(await h.owner.chat.history({ ...h.ref, sessionId }));
    expect(history).toContain("hi\uFFFDthere");
    expect(history).toContain("Heard you.");
  });
});
