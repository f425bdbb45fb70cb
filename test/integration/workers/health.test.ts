import type { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { RedisConfig } from "@/server/config/redis";
import { checkHealth } from "@/server/modules/health/health.service";
import { BERTH_SCHEDULERS } from "@/server/queue/schedulers";
import { createRedisConnection } from "@/server/redis";
import { berthSchedules } from "@/workers/processors";
import { startWorkerRuntime, type WorkerRuntime } from "@/workers/runtime";
import { isolatedRedisConfig, testLog } from "../queue/queue-fixtures";
import { processBerth } from "@/server/composition/process-berth";

const workersConfig = { concurrency: 1, healthPort: 0, heartbeatTtlMs: 15_000 };
// The runtimes here run the audit flush schedule only (sweep and reconcile would act on this machine's
// workspaces), so that is the one scheduler health expects.
const AUDIT_ONLY = BERTH_SCHEDULERS.filter((scheduler) => scheduler.id === "audit.flush.tick");

describe("health service and worker probes (real Postgres and Redis)", () => {
  let redis: RedisConfig;
  let connection: Redis;
  let runtime: WorkerRuntime | undefined;

  beforeEach(() => {
    redis = isolatedRedisConfig();
    connection = createRedisConnection(redis, "producer", "test-health");
  });
  afterEach(async () => {
    await runtime?.stop();
    runtime = undefined;
    await connection.quit();
  });

  const deps = () => ({
    db: processBerth().db,
    redis: connection,
    redisPrefix: redis.prefix,
    heartbeatTtlMs: 15_000,
    expectedSchedulers: AUDIT_ONLY,
  });

  it("is unavailable while no worker beats, even with database and Redis up", async () => {
    const report = await checkHealth(deps());
    expect(report.status).toBe("unavailable");
    expect(report.checks.database.ok).toBe(true);
    expect(report.checks.redis.ok).toBe(true);
    expect(report.checks.workers).toMatchObject({ ok: false, alive: 0, error: "no live worker" });
  });

  it("is ok with a running worker runtime, whose /live and /ready answer 200; after stop it is gone", async () => {
    runtime = await startWorkerRuntime({
      redis,
      workers: workersConfig,
      log: testLog,
      healthPort: 0,
      schedules: berthSchedules,
    });
    const report = await checkHealth(deps());
    expect(report.status).toBe("ok");
    expect(report.checks.schedulers).toMatchObject({ ok: true, missing: [] });
    expect(report.checks.workers).toMatchObject({ ok: true, alive: 1 });

    const base = `http://127.0.0.1:${runtime.healthPort}`;
    expect((await fetch(`${base}/live`)).status).toBe(200);
    const ready = await fetch(`${base}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: "ready" });

    await runtime.stop();
    expect(runtime.isReady()).toBe(false);
    runtime = undefined;
    expect((await checkHealth(deps())).checks.workers).toMatchObject({ ok: false, alive: 0 });
  });

  it("reports a failing database without leaking its error text", async () => {
    runtime = await startWorkerRuntime({
      redis,
      workers: workersConfig,
      log: testLog,
      healthPort: null,
      schedules: [],
    });
    const report = await checkHealth({
      ...deps(),
      pingDatabase: () => Promise.reject(new Error("password authentication failed for user postgres")),
    });
    expect(report.status).toBe("unavailable");
    expect(report.checks.database).toMatchObject({ ok: false, error: "unreachable" });
    expect(JSON.stringify(report)).not.toContain("password");
    expect(report.checks.workers.ok).toBe(true);
  });

  it("reports an unreachable Redis (and therefore no worker information)", async () => {
    const dead = createRedisConnection({ url: "redis://127.0.0.1:1", prefix: "x" }, "producer", "test-dead");
    try {
      const report = await checkHealth({
        db: processBerth().db,
        redis: dead,
        redisPrefix: "x",
        heartbeatTtlMs: 15_000,
        timeoutMs: 3_000,
      });
      expect(report.status).toBe("unavailable");
      expect(report.checks.redis.ok).toBe(false);
      expect(report.checks.workers.ok).toBe(false);
      expect(report.checks.database.ok).toBe(true);
    } finally {
      dead.disconnect();
    }
  });

  it("counts a worker as dead once its heartbeat is older than the TTL", async () => {
    const { beat, aliveWorkers } = await import("@/server/queue/heartbeat");
    const now = Date.now();
    await beat(connection, redis.prefix, "crashed-worker", now - 20_000);
    await beat(connection, redis.prefix, "live-worker", now - 1_000);
    expect(await aliveWorkers(connection, redis.prefix, 15_000, now)).toEqual(["live-worker"]);
  });
});
