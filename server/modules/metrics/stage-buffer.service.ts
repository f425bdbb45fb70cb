import type { Redis } from "ioredis";
import { redisKey } from "@/server/redis";
import { insertStageSamples, pruneStageSamplesBefore } from "./metrics.data";
import { ZStageSample, type TStageSample, type TStageSampleInput } from "./stage-sample.schema";
import { parseJsonOrNull } from "@/server/shared/json";
import type { Db } from "@/server/db";

/**
 * Stage timings are measured on the hot path (provisions, attaches, turns) but written off it: recording is
 * one un-awaited RPUSH to a Redis list; the `metrics.flush` job (a schedule) moves the list into Postgres in
 * batches and prunes rows older than the retention window. Measurements are best effort: a Redis error is
 * logged, never thrown into a provision or a turn.
 */
export type StageBufferDeps = { redis: Redis; redisPrefix: string };

/** Buffers stage samples over one Redis and prefix (the root's `berth.stageSamples`). Never rejects. */
export type StageSampleRecorder = {
  record(samples: readonly TStageSampleInput[], onError?: (error: unknown) => void): Promise<void>;
};

/** A recorder over `deps`, resolved at each record (a failure to build them goes to `onError` too). */
export function stageSampleRecorder(deps: () => StageBufferDeps): StageSampleRecorder {
  return {
    record: (samples, onError) => recordStageSamples(samples, { deps, ...(onError ? { onError } : {}) }),
  };
}

function bufferKey(prefix: string): string {
  return redisKey(prefix, "metrics", "stages");
}

/** Buffers samples for the next flush. Never rejects (a failure goes to `onError`). */
async function recordStageSamples(
  samples: readonly TStageSampleInput[],
  options: { deps: () => StageBufferDeps; onError?: (error: unknown) => void },
): Promise<void> {
  if (samples.length === 0) return;
  try {
    const deps = options.deps();
    const lines = samples.map((sample) => JSON.stringify(ZStageSample.parse(sample)));
    await deps.redis.rpush(bufferKey(deps.redisPrefix), ...lines);
  } catch (error) {
    options.onError?.(error);
  }
}

export type StageFlushResult = { written: number; pruned: number; unreadable: number };

/**
 * Drains the buffer into `stage_samples` (bounded batches) and deletes samples older than `retentionDays`.
 * A batch the database refuses is pushed back to the head of the list and the flush fails (BullMQ retries).
 */
export async function flushStageSamples(
  options: { retentionDays: number; batchSize?: number; maxBatches?: number; now?: Date },
  deps: StageBufferDeps,
  db: Db,
): Promise<StageFlushResult> {
  const key = bufferKey(deps.redisPrefix);
  const batchSize = options.batchSize ?? 1_000;
  let written = 0;
  let unreadable = 0;
  for (let batch = 0; batch < (options.maxBatches ?? 50); batch++) {
    const raw = await deps.redis.lpop(key, batchSize);
    if (!raw || raw.length === 0) break;
    const samples: TStageSample[] = [];
    for (const line of raw) {
      const parsed = ZStageSample.safeParse(parseJsonOrNull(line));
      if (parsed.success) samples.push(parsed.data);
      else unreadable += 1;
    }
    try {
      written += await insertStageSamples(samples, db);
    } catch (error) {
      await deps.redis.lpush(key, ...raw.toReversed());
      throw error;
    }
    if (raw.length < batchSize) break;
  }
  const now = options.now ?? new Date();
  const pruned = await pruneStageSamplesBefore(
    new Date(now.getTime() - options.retentionDays * 86_400_000),
    db,
  );
  return { written, pruned, unreadable };
}
