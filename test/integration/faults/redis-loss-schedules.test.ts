/**
 * Redis loses its data under a running worker (FLUSHALL: a failover to an empty replica; a restart without
 * persistence) on a redis-server of this test's own: the schedulers vanish with it. Health (the API's
 * service and the worker's /ready) must say so instead of 200, and the running worker must re-create them
 * (on reconnect, and on its timer) without a restart.
 */
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { RedisConfig } from "@/server/config/redis";
import { checkHealth } from "@/server/modules/health/health.service";
import { BERTH_SCHEDULERS, missingSchedulers } from "@/server/queue/schedulers";
import { createRedisConnection } from "@/server/redis";
import { berthSchedules } from "@/workers/processors";
import { startWorkerRuntime, type WorkerRuntime } from "@/workers/runtime";
import { startOwnRedis, type OwnRedis } from "../../fixtures/faults/redis-server";
import { testLog } from "../queue/queue-fixtures";
import { processBerth } from "@/server/composition/process-berth";

// The runtime runs the audit flush schedule only (the sweep and reconcile would act on this machine's
// workspaces); health expects exactly that one.
const AUDIT_ONLY = BERTH_SCHEDULERS.filter((scheduler) => scheduler.id === "audit.flush.tick");
const workersConfig = { concurrency: 1, healthPort: 0, heartbeatTtlMs: 3_000 };

describe("schedulers after Redis lost its data", { timeout: 90_000 }, () => {
  let own: OwnRedis;
  let redis: RedisConfig;
  let connection: Redis;
  let runtime: WorkerRuntime | undefined;

  beforeAll(async () => {
    own = await startOwnRedis();
  });
  afterAll(async () => {
    await own.stop();
  });
  afterEach(async () => {
    await runtime?.stop();
    runtime = undefined;
    connection.disconnect();
  });

  async function start(scheduleCheckIntervalMs: number): Promise<WorkerRuntime> {
    redis = { url: own.url, prefix: `faults-${randomBytes(3).toString("hex")}` };
    connection = createRedisConnection(redis, "producer", "test-schedules");
    runtime = await startWorkerRuntime({
      redis,
      workers: workersConfig,
      log: testLog,
      healthPort: 0,
      schedules: berthSchedules,
      scheduleCheckIntervalMs,
    });
    return runtime;
  }

  const health = () =>
    checkHealth({
      db: processBerth().db,
      redis: connection,
      redisPrefix: redis.prefix,
      heartbeatTtlMs: workersConfig.heartbeatTtlMs,
      expectedSchedulers: AUDIT_ONLY,
      timeoutMs: 2_000,
    });
  const ready = async (worker: WorkerRuntime) => {
    const response = await fetch(`http://127.0.0.1:${worker.healthPort}/ready`);
    return { status: response.status, body: (await response.json()) as unknown };
  };

  it("health reports the missing scheduler (API and worker), and a Redis restart brings it back", async () => {
    // A timer too slow to matter here: what brings the schedule back is the reconnect.
    const worker = await start(600_000);
    expect((await health()).status).toBe("ok");
    expect((await ready(worker)).status).toBe(200);

    await own.flushAll();
    const report = await health();
    expect(report.status).toBe("unavailable");
    expect(report.checks.schedulers).toMatchObject({
      ok: false,
      missing: ["audit.flush.tick"],
      error: "missing scheduler",
    });
    expect(await ready(worker)).toEqual({
      status: 503,
      // The worker runs every one of berthSchedules: all of them went with Redis' data.
      body: { status: "not ready", missingSchedules: berthSchedules.map((schedule) => schedule.id) },
    });

    await own.restart();
    await vi.waitFor(
      async () => {
        const after = await health();
        expect(after.checks.schedulers).toMatchObject({ ok: true, missing: [] });
        expect(after.status).toBe("ok");
        expect((await ready(worker)).status).toBe(200);
      },
      { timeout: 20_000, interval: 250 },
    );
  });

  it("a running worker re-creates schedules that vanished without a reconnect (its timer)", async () => {
    await start(1_000);
    await own.flushAll();
    expect(await missingSchedulers(connection, redis.prefix, AUDIT_ONLY)).toEqual(["audit.flush.tick"]);
    await vi.waitFor(
      async () => expect(await missingSchedulers(connection, redis.prefix, AUDIT_ONLY)).toEqual([]),
      { timeout: 10_000, interval: 200 },
    );
  });
});
