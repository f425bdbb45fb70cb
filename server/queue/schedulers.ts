import type { Redis } from "ioredis";
import { bullPrefix } from "./queues";

/**
 * The job schedulers Berth's workers keep (workers/processors.ts, workers/processors/workspace.processors.ts
 * declare their timing), by id and queue. Health reads this list, not Redis, for what must exist: a Redis
 * that lost its data has lost the schedulers' own record of themselves too.
 */
export const BERTH_SCHEDULERS = [
  { id: "audit.flush.tick", queue: "audit" },
  { id: "metrics.flush.tick", queue: "metrics" },
  { id: "metrics.sample.tick", queue: "metrics" },
  { id: "metering.flush.tick", queue: "metering" },
  { id: "workspace.sweep.tick", queue: "workspace" },
  { id: "workspace.reconcile.tick", queue: "workspace" },
  { id: "checkpoint.prune.tick", queue: "workspace" },
  { id: "pool.refill.tick", queue: "workspace" },
] as const;

export type BerthSchedulerId = (typeof BERTH_SCHEDULERS)[number]["id"];

/**
 * The ids of `expected` schedulers that have no entry in Redis. Reads BullMQ's scheduler set
 * (`<bull prefix>:<queue>:repeat`, one member per scheduler id) directly, so a health probe needs no Queue.
 */
export async function missingSchedulers(
  redis: Redis,
  redisPrefix: string,
  expected: readonly { id: string; queue: string }[] = BERTH_SCHEDULERS,
): Promise<string[]> {
  const scores = await Promise.all(
    expected.map(({ id, queue }) => redis.zscore(`${bullPrefix(redisPrefix)}:${queue}:repeat`, id)),
  );
  return expected.filter((_, index) => scores[index] === null).map(({ id }) => id);
}
