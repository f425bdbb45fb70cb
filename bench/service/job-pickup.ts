import { z } from "zod";
import { type RedisConfig } from "@/server/config/redis";
import { createLogger } from "@/server/logger";
import { createEnqueue } from "@/server/queue/enqueue";
import { createQueues } from "@/server/queue/queues";
import { defineJob, type JobCatalog } from "@/server/queue/types";
import { createRedisConnection, redisKey } from "@/server/redis";
import { ProcessorRegistry, startWorkers } from "@/workers/registry";

const SAMPLES = 200;
const WARMUP = 20;

/** A bench-only catalog: the queue machinery is generic over catalogs, Berth's product jobs stay untouched. */
const benchCatalog = {
  "bench.ping": defineJob({
    queue: "bench-pickup",
    schema: z.object({ seq: z.number().int().min(0) }),
    options: { attempts: 1, removeOnComplete: true, removeOnFail: true },
  }),
} as const satisfies JobCatalog;

export type PickupFigures = { samplesMs: number[]; baselineSamplesMs: number[] };

/**
 * Job pickup latency, sequential: the time from Berth's typed `enqueue` to the processor starting in a
 * worker built by `startWorkers` (the workers' own factory: payload re-validation, logging wrapper), the
 * next job enqueued only after the previous one completed. Baseline: the same round trip as a raw list
 * queue, LPUSH on one ioredis connection to BRPOP returning on another.
 */
export async function measureJobPickup(redis: RedisConfig): Promise<PickupFigures> {
  return { samplesMs: await berthPickup(redis), baselineSamplesMs: await rawListPickup(redis) };
}

async function berthPickup(redis: RedisConfig): Promise<number[]> {
  const log = createLogger({ level: "silent" });
  const connection = createRedisConnection(redis, "producer", "bench-producer");
  const queues = createQueues(benchCatalog, { connection, redis, log });
  const enqueue = createEnqueue(queues);
  let started: ((at: number) => void) | undefined;
  const registry = new ProcessorRegistry(benchCatalog).registerProcessor("bench.ping", () => {
    started?.(performance.now());
    return Promise.resolve();
  });
  const pool = await startWorkers({ registry, redis, concurrency: 1, log });
  const worker = pool.workers[0]!;
  const samples: number[] = [];
  try {
    for (let seq = 0; seq < WARMUP + SAMPLES; seq++) {
      const pickedUp = new Promise<number>((resolve) => (started = resolve));
      const completed = new Promise<void>((resolve) => worker.once("completed", () => resolve()));
      const sentAt = performance.now();
      await enqueue("bench.ping", { seq });
      samples.push((await pickedUp) - sentAt);
      await completed;
    }
  } finally {
    await pool.close();
    await queues.close();
    await connection.quit();
  }
  return samples.slice(WARMUP);
}

async function rawListPickup(redis: RedisConfig): Promise<number[]> {
  const producer = createRedisConnection(redis, "producer", "bench-lpush");
  const consumer = createRedisConnection(redis, "worker", "bench-brpop");
  const key = redisKey(redis.prefix, "bench", "list");
  const samples: number[] = [];
  try {
    for (let seq = 0; seq < WARMUP + SAMPLES; seq++) {
      const popped = consumer.brpop(key, 0).then(() => performance.now());
      const sentAt = performance.now();
      await producer.lpush(key, JSON.stringify({ seq }));
      samples.push((await popped) - sentAt);
    }
  } finally {
    await producer.quit();
    await consumer.quit();
  }
  return samples.slice(WARMUP);
}
