import type { Redis } from "ioredis";
import { redisKey } from "@/server/redis";

/**
 * Worker liveness, shared by the workers (writers) and the health service (reader): one sorted set per
 * installation, member = worker process id, score = time of its last beat. A crashed worker simply stops
 * beating and ages out; a clean shutdown removes itself at once.
 */
function heartbeatKey(redisPrefix: string): string {
  return redisKey(redisPrefix, "workers", "heartbeats");
}

export async function beat(
  redis: Redis,
  redisPrefix: string,
  workerId: string,
  now = Date.now(),
): Promise<void> {
  await redis.zadd(heartbeatKey(redisPrefix), now, workerId);
}

async function removeHeartbeat(redis: Redis, redisPrefix: string, workerId: string): Promise<void> {
  await redis.zrem(heartbeatKey(redisPrefix), workerId);
}

/** Worker ids that beat within the last `ttlMs`; prunes older entries on the way. */
export async function aliveWorkers(
  redis: Redis,
  redisPrefix: string,
  ttlMs: number,
  now = Date.now(),
): Promise<string[]> {
  const key = heartbeatKey(redisPrefix);
  await redis.zremrangebyscore(key, "-inf", `(${now - ttlMs}`);
  return redis.zrangebyscore(key, now - ttlMs, "+inf");
}

/** Beats now and every `intervalMs` until stopped; `stop()` removes this worker from the set. */
export function startHeartbeat(params: {
  redis: Redis;
  redisPrefix: string;
  workerId: string;
  intervalMs: number;
  onError: (error: unknown) => void;
}): { ready: Promise<void>; stop(): Promise<void> } {
  const { redis, redisPrefix, workerId } = params;
  const tick = () => beat(redis, redisPrefix, workerId).catch(params.onError);
  const ready = beat(redis, redisPrefix, workerId);
  const timer = setInterval(() => void tick(), params.intervalMs);
  timer.unref();
  return {
    ready,
    async stop() {
      clearInterval(timer);
      await removeHeartbeat(redis, redisPrefix, workerId).catch(params.onError);
    },
  };
}
