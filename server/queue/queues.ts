import { Queue, QueueEvents } from "bullmq";
import type { Redis } from "ioredis";
import type { RedisConfig } from "@/server/config/redis";
import type { Logger } from "@/server/logger";
import { createRedisConnection } from "@/server/redis";
import { processRoot } from "@/server/shared/process-root";
import { jobCatalog, type BerthJobCatalog } from "./catalog";
import type { JobCatalog, QueueNameOf } from "./types";

/** BullMQ keys live under `<prefix>:bull:<queue>:…`, apart from Berth's own `<prefix>:<thing>` keys. */
export function bullPrefix(redisPrefix: string): string {
  return `${redisPrefix}:bull`;
}

export function queueNamesOf<C extends JobCatalog>(catalog: C): QueueNameOf<C>[] {
  return [...new Set(Object.values(catalog).map((spec) => spec.queue))] as QueueNameOf<C>[];
}

/** Every queue of a catalog, created eagerly: `get()` never returns undefined and never creates lazily. */
export type QueueSet<C extends JobCatalog> = {
  readonly catalog: C;
  readonly redisPrefix: string;
  get(queue: QueueNameOf<C>): Queue;
  all(): Queue[];
  /** Events of one queue (for `job.waitUntilFinished`); opened on first use, one blocking connection each. */
  events(queue: QueueNameOf<C>): Promise<QueueEvents>;
  close(): Promise<void>;
};

export function createQueues<C extends JobCatalog>(
  catalog: C,
  deps: { connection: Redis; redis: RedisConfig; log: Logger },
): QueueSet<C> {
  const prefix = bullPrefix(deps.redis.prefix);
  const queues = new Map<string, Queue>();
  for (const name of queueNamesOf(catalog)) {
    const queue = new Queue(name, { connection: deps.connection, prefix });
    queue.on("error", (error) => deps.log.error({ err: error, queue: name }, "queue error"));
    queues.set(name, queue);
  }
  const events = new Map<string, Promise<QueueEvents>>();

  return {
    catalog,
    redisPrefix: deps.redis.prefix,
    get(name) {
      const queue = queues.get(name);
      // Unreachable for names typed from the catalog; guards against casts.
      if (!queue) throw new Error(`unknown queue "${name}"`);
      return queue;
    },
    all: () => [...queues.values()],
    events(name) {
      let pending = events.get(name);
      if (!pending) {
        const queueEvents = new QueueEvents(name, {
          connection: createRedisConnection(deps.redis, "worker", `berth-events-${name}`),
          prefix,
        });
        queueEvents.on("error", (error) => deps.log.error({ err: error, queue: name }, "queue events error"));
        pending = queueEvents.waitUntilReady().then(() => queueEvents);
        events.set(name, pending);
      }
      return pending;
    },
    async close() {
      const openEvents = await Promise.all(events.values());
      await Promise.all([...openEvents.map((e) => e.close()), ...[...queues.values()].map((q) => q.close())]);
    },
  };
}

/**
 * A process' queues of Berth's catalog on a producer connection of their own, closed with them (the Berth
 * root builds them once). A missing or invalid REDIS_URL fails at config validation, never as an absent queue.
 */
export function createProcessQueues(deps: { redis: RedisConfig; log: Logger }): QueueSet<BerthJobCatalog> {
  const connection = createRedisConnection(deps.redis, "producer", "berth-queues");
  const queues = createQueues(jobCatalog, { connection, redis: deps.redis, log: deps.log });
  return {
    ...queues,
    async close() {
      await queues.close();
      await connection.quit().catch(() => connection.disconnect());
    },
  };
}

/** The process root's queues, for tests and bench/ only: server code is handed the root's. */
export function getQueues(): QueueSet<BerthJobCatalog> {
  return processRoot<{ queues: QueueSet<BerthJobCatalog> }>().queues;
}
