import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { z } from "zod";
import { loadRedisConfig, type RedisConfig } from "@/server/config/redis";
import { createLogger } from "@/server/logger";
import { createQueues, type QueueSet } from "@/server/queue/queues";
import { defineJob, type JobCatalog } from "@/server/queue/types";
import { createRedisConnection } from "@/server/redis";

/**
 * The run's Redis (from the global setup) under a prefix unique to one test, so tests never see each
 * other's queues, schedulers or heartbeats.
 */
export function isolatedRedisConfig(): RedisConfig {
  const base = loadRedisConfig();
  // Derived from the variable, not the effective prefix: on a Cluster that is a hash tag, `{berth_test_x}`,
  // and a child process given BERTH_REDIS_PREFIX (redisPrefixEnv) must arrive at the same prefix.
  const prefix = `${redisPrefixEnv(base)}-${randomBytes(3).toString("hex")}`;
  return loadRedisConfig({ REDIS_URL: base.url, BERTH_REDIS_PREFIX: prefix });
}

/** The BERTH_REDIS_PREFIX that gives a process `config`'s prefix (a Cluster's is wrapped as a hash tag). */
export function redisPrefixEnv(config: RedisConfig): string {
  return config.prefix.replace(/^\{(.*)\}$/, "$1");
}

// Silent: failures surface as assertion errors; set level "debug" here when diagnosing.
export const testLog = createLogger({ level: "silent" }, { name: "test" });

/** A catalog of test-only jobs: the machinery is generic over catalogs, Berth's is one instance. */
export const testCatalog = {
  "test.echo": defineJob({
    queue: "test-main",
    schema: z.object({ itemId: z.string().min(1), note: z.string().default("none") }),
    options: { attempts: 1 },
    jobId: (payload) => `test.echo__${payload.itemId}`,
  }),
  "test.flaky": defineJob({
    queue: "test-main",
    schema: z.object({ failTimes: z.number().int().min(0), code: z.enum(["UNAVAILABLE", "NOT_FOUND"]) }),
    options: { attempts: 3, backoff: { type: "fixed", delay: 100 } },
  }),
  "test.slow": defineJob({
    queue: "test-slow",
    schema: z.object({ label: z.string() }),
    options: { attempts: 1 },
  }),
} as const satisfies JobCatalog;
export type TestCatalog = typeof testCatalog;

export function openTestQueues(redis: RedisConfig): { queues: QueueSet<TestCatalog>; connection: Redis } {
  const connection = createRedisConnection(redis, "producer", "test-producer");
  return { queues: createQueues(testCatalog, { connection, redis, log: testLog }), connection };
}
