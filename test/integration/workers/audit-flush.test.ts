import type { Job, QueueEvents } from "bullmq";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { mintTenantScope } from "@/server/auth/scope";
import type { RedisConfig } from "@/server/config/redis";
import { getDb } from "@/server/db";
import { appendAuditLogs } from "@/server/modules/audit/audit.data";
import type { TBufferedAuditEntry } from "@/server/modules/audit/audit-buffer.schema";
import {
  auditDeadLetters,
  flushAuditBuffer,
  pendingAuditEntries,
  recordAudit,
  writeBufferedAuditEntries,
  type AuditBufferDeps,
} from "@/server/modules/audit/audit-buffer.service";
import { jobCatalog, type BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import { createQueues, type QueueSet } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import { applySchedules, defineSchedule } from "@/workers/schedules";
import { startWorkerRuntime, type WorkerRuntime } from "@/workers/runtime";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { isolatedRedisConfig, testLog } from "../queue/queue-fixtures";

describe("audit.flush end to end (real Redis, Postgres and workers)", () => {
  let redis: RedisConfig;
  let connection: Redis;
  let queues: QueueSet<BerthJobCatalog>;
  let events: QueueEvents;
  let runtime: WorkerRuntime;
  let tenant: TestTenant;

  beforeAll(async () => {
    redis = isolatedRedisConfig();
    connection = createRedisConnection(redis, "producer", "test-audit");
    queues = createQueues(jobCatalog, { connection, redis, log: testLog });
    events = await queues.events("audit");
    tenant = await createTestTenant();
    runtime = await startWorkerRuntime({
      redis,
      workers: { concurrency: 2, healthPort: 0, heartbeatTtlMs: 15_000 },
      log: testLog,
      healthPort: null,
      schedules: [],
    });
  });
  afterAll(async () => {
    await runtime.stop();
    await queues.close();
    await connection.quit();
  });

  /** The API-side deps, capturing the flush job so the test can wait for exactly that job. */
  function apiDeps(): AuditBufferDeps & { flushJob: () => Job } {
    let job: Job | undefined;
    const enqueue = createEnqueue(queues);
    return {
      redis: connection,
      redisPrefix: redis.prefix,
      requestFlush: async () => {
        job = await enqueue("audit.flush", { trigger: "write" }, { deduplicationId: "audit.flush" });
      },
      flushJob: () => job!,
    };
  }

  it("record → audit.flush job → a row in AuditLog with actor, target and details", async () => {
    const deps = apiDeps();
    const { id } = await recordAudit(
      tenant.scope,
      {
        action: "agent.create",
        targetType: "agent",
        targetId: "ag_1",
        outcome: "success",
        details: { name: "x" },
      },
      deps,
    );
    const result = await deps.flushJob().waitUntilFinished(events);
    expect(result).toMatchObject({ written: 1 });

    const rows = await getDb().auditLog.findMany({ where: { tenantId: tenant.tenantId } });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      id,
      action: "agent.create",
      actorType: "user",
      actorId: tenant.owner.id,
      targetType: "agent",
      targetId: "ag_1",
      outcome: "success",
      details: { name: "x" },
    });
    expect(await pendingAuditEntries(connection, redis.prefix)).toBe(0);
  });

  it("a flush that crashed after writing is retried without duplicate rows", async () => {
    const deps = { ...apiDeps(), requestFlush: () => Promise.resolve() };
    for (const n of [1, 2, 3]) {
      await recordAudit(tenant.scope, { action: `retry.test.${n}`, outcome: "success" }, deps);
    }
    const crashAfterWrite = flushAuditBuffer({
      db: getDb(),
      redis: connection,
      redisPrefix: redis.prefix,
      writeEntries: async (entries) => {
        await writeBufferedAuditEntries(entries, getDb());
        throw new Error("worker killed after the insert, before the acknowledgement");
      },
    });
    await expect(crashAfterWrite).rejects.toThrow(/worker killed/);
    expect(await pendingAuditEntries(connection, redis.prefix)).toBe(3);

    const retry = await flushAuditBuffer({ db: getDb(), redis: connection, redisPrefix: redis.prefix });
    expect(retry.written).toBe(0); // all three were already in; skipped by id
    const rows = await getDb().auditLog.findMany({
      where: { tenantId: tenant.tenantId, action: { startsWith: "retry.test." } },
    });
    expect(rows.map((r) => r.action).sort()).toEqual(["retry.test.1", "retry.test.2", "retry.test.3"]);
    expect(await pendingAuditEntries(connection, redis.prefix)).toBe(0);
  });

  it("a flush that crashed after writing part of a batch is retried: the rest is written, nothing twice", async () => {
    const deps = { ...apiDeps(), requestFlush: () => Promise.resolve() };
    const ids: string[] = [];
    for (const n of [1, 2, 3]) {
      ids.push(
        (await recordAudit(tenant.scope, { action: `partial.test.${n}`, outcome: "success" }, deps)).id,
      );
    }
    const crashMidway = flushAuditBuffer({
      db: getDb(),
      redis: connection,
      redisPrefix: redis.prefix,
      writeEntries: async (entries) => {
        await writeBufferedAuditEntries(entries.slice(0, 1), getDb());
        throw new Error("worker killed after the first insert");
      },
    });
    await expect(crashMidway).rejects.toThrow(/worker killed/);

    const retry = await flushAuditBuffer({ db: getDb(), redis: connection, redisPrefix: redis.prefix });
    expect(retry.written).toBe(2);
    const rows = await getDb().auditLog.findMany({
      where: { tenantId: tenant.tenantId, action: { startsWith: "partial.test." } },
      orderBy: { action: "asc" },
    });
    expect(rows.map((row) => row.id)).toEqual(ids);
    expect(rows.every((row) => row.actorType === "user" && row.actorId === tenant.owner.id)).toBe(true);
    expect(await pendingAuditEntries(connection, redis.prefix)).toBe(0);
  });

  it("appendAuditLogs keeps caller-supplied ids, skips ones already written, and rejects an invalid batch whole", async () => {
    const [a, b] = [crypto.randomUUID(), crypto.randomUUID()];
    const entry = (id: string) => ({ id, action: "direct.append", outcome: "success" as const });
    expect(await appendAuditLogs(tenant.scope, [entry(a)], getDb())).toBe(1);
    expect(await appendAuditLogs(tenant.scope, [entry(a), entry(b)], getDb())).toBe(1);
    expect(
      (await getDb().auditLog.findMany({ where: { action: "direct.append" }, select: { id: true } }))
        .map((row) => row.id)
        .sort(),
    ).toEqual([a, b].sort());

    const c = crypto.randomUUID();
    await expect(
      appendAuditLogs(tenant.scope, [entry(c), entry("not-a-uuid")], getDb()),
    ).rejects.toMatchObject({
      code: "BAD_REQUEST",
    });
    expect(await getDb().auditLog.count({ where: { id: c } })).toBe(0);
  });

  it("drops entries of a deleted tenant instead of blocking the buffer", async () => {
    const deps = { ...apiDeps(), requestFlush: () => Promise.resolve() };
    const gone = mintTenantScope({
      tenantId: crypto.randomUUID(),
      userId: null,
      apiKeyId: null,
      role: "owner",
    });
    await recordAudit(gone, { action: "orphan.entry", outcome: "success" }, deps);
    await recordAudit(tenant.scope, { action: "live.entry", outcome: "failure" }, deps);

    const result = await flushAuditBuffer({ db: getDb(), redis: connection, redisPrefix: redis.prefix });
    expect(result.written).toBe(1);
    expect(await pendingAuditEntries(connection, redis.prefix)).toBe(0);
    expect(await getDb().auditLog.count({ where: { action: "orphan.entry" } })).toBe(0);
  });

  it("sets aside exactly the entries the database refuses (halving the batch), writes the rest, and counts them", async () => {
    const deps = { ...apiDeps(), requestFlush: () => Promise.resolve() };
    for (let n = 0; n < 9; n += 1) {
      await recordAudit(
        tenant.scope,
        { action: n === 6 ? "refused.entry" : `kept.${n}`, outcome: "success" },
        deps,
      );
    }
    // The real table, with one entry's content made unstorable (a NUL in jsonb: Postgres refuses it, 22P05).
    const writeEntries = async (entries: TBufferedAuditEntry[]) => {
      const { count } = await getDb().auditLog.createMany({
        data: entries.map((entry) => ({
          id: entry.id,
          tenantId: entry.tenantId,
          actorType: entry.actorType,
          actorId: entry.actorId,
          action: entry.action,
          outcome: entry.outcome,
          at: entry.at,
          details: entry.action === "refused.entry" ? { poison: "\u0000" } : { ok: true },
        })),
        skipDuplicates: true,
      });
      return count;
    };
    const before = (await auditDeadLetters(connection, redis.prefix)).total;
    const result = await flushAuditBuffer({
      db: getDb(),
      redis: connection,
      redisPrefix: redis.prefix,
      writeEntries,
    });
    expect(result).toMatchObject({ written: 8, deadLettered: 1 });
    expect(await pendingAuditEntries(connection, redis.prefix)).toBe(0);
    expect(
      await getDb().auditLog.count({ where: { tenantId: tenant.tenantId, action: { startsWith: "kept." } } }),
    ).toBe(8);
    const dead = await auditDeadLetters(connection, redis.prefix);
    expect(dead.total).toBe(before + 1);
    expect(dead.newest.at(-1)?.reason).toMatch(/^refused by the database: P20\d\d .*22P05/);
    expect(JSON.parse(dead.newest.at(-1)!.entry)).toMatchObject({ action: "refused.entry" });

    // An outage is not a refusal: the batch stays claimed for the retry, nothing is set aside.
    await recordAudit(tenant.scope, { action: "outage.entry", outcome: "success" }, deps);
    await expect(
      flushAuditBuffer({
        db: getDb(),
        redis: connection,
        redisPrefix: redis.prefix,
        writeEntries: () => Promise.reject(new Error("connection refused")),
      }),
    ).rejects.toThrow(/connection refused/);
    expect(await pendingAuditEntries(connection, redis.prefix)).toBe(1);
    expect((await auditDeadLetters(connection, redis.prefix)).total).toBe(before + 1);
    expect(
      (await flushAuditBuffer({ db: getDb(), redis: connection, redisPrefix: redis.prefix })).written,
    ).toBe(1);
  });

  it("rejects an invalid entry at record time (BAD_REQUEST), buffering nothing", async () => {
    const deps = apiDeps();
    await expect(recordAudit(tenant.scope, { action: "", outcome: "success" }, deps)).rejects.toMatchObject({
      code: "BAD_REQUEST",
    });
    expect(await pendingAuditEntries(connection, redis.prefix)).toBe(0);
  });

  it("a repeating scheduler (upsertJobScheduler) flushes without any explicit request, and is removed when undeclared", async () => {
    const deps = { ...apiDeps(), requestFlush: () => Promise.resolve() };
    await recordAudit(tenant.scope, { action: "scheduled.flush", outcome: "success" }, deps);
    const tick = defineSchedule<BerthJobCatalog, "audit.flush">({
      id: "audit.flush.test-tick",
      job: "audit.flush",
      payload: { trigger: "schedule" },
      every: 200,
    });
    await applySchedules(queues, [tick], testLog);
    expect((await queues.get("audit").getJobSchedulers()).map((s) => s.key)).toEqual([
      "audit.flush.test-tick",
    ]);

    await vi.waitFor(
      async () => expect(await getDb().auditLog.count({ where: { action: "scheduled.flush" } })).toBe(1),
      { timeout: 15_000, interval: 100 },
    );

    await applySchedules(queues, [], testLog);
    expect(await queues.get("audit").getJobSchedulers()).toEqual([]);
  });
});
