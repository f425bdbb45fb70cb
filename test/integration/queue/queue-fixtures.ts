import { randomBytes } from "node:crypto";
import type { Job, Queue } from "bullmq";
import type { Redis } from "ioredis";
import { vi } from "vitest";
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

/**
 * What `job.waitUntilFinished` answers (the return value; a failure rejects with its reason), read from the
 * job's state instead of waiting for its event. A QueueEvents hears only events added after its XREAD is
 * issued: a job that finishes between BullMQ's own state check and that read (a QueueEvents opened just
 * before, or re-reading after a blocking timeout) is never announced, and the wait runs to its timeout.
 */
export async function jobOutcome(queue: Queue, job: Job, timeoutMs = 30_000): Promise<unknown> {
  const jobId = job.id;
  if (!jobId) throw new Error(`job ${job.name} has no id`);
  const outcome = await vi.waitFor(
    async () => {
      // The state first, then the job: BullMQ writes the return value with the move to completed, so a
      // job read before its state could still be the running one, its return value null (a CI run saw it).
      const state = await queue.getJobState(jobId);
      if (state === "completed" || state === "failed") {
        const finished = (await queue.getJob(jobId)) as Job | undefined;
        if (!finished) throw new Error(`job ${job.name} (${jobId}) was removed once ${state}`);
        return state === "completed"
          ? { completed: true as const, value: finished.returnvalue as unknown }
          : { completed: false as const, reason: finished.failedReason };
      }
      throw new Error(`job ${job.name} (${jobId}) is ${state} after ${timeoutMs} ms`);
    },
    { timeout: timeoutMs, interval: 50 },
  );
  if (!outcome.completed) throw new Error(outcome.reason);
  return outcome.value;
}
