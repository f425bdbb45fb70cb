import type { Redis } from "ioredis";
import { redisKey } from "@/server/redis";

/**
 * Process liveness, one sorted set per installation and group: member = process id, score = time of its
 * last beat. A crashed process simply stops beating and ages out; a clean shutdown removes itself at once.
 * Groups: `workers` (the worker processes: their writers are workers/runtime.ts, their reader the health
 * service) and `holders` (every process that holds chat turns and workspace leases: a dead holder's turns
 * and leases are released by the others, see server/modules/chat/dead-holders.ts).
 */
export type HeartbeatGroup = "workers" | "holders";

function heartbeatKey(redisPrefix: string, group: HeartbeatGroup): string {
  return redisKey(redisPrefix, group, "heartbeats");
}

/**
 * When the group's set was first written. A set Redis lost (a restart without persistence, a failover) is
 * empty until every live process has beaten again: until one TTL has passed since it was re-created,
 * nobody can be declared dead from it.
 */
function epochKey(redisPrefix: string, group: HeartbeatGroup): string {
  return redisKey(redisPrefix, group, "heartbeats-since");
}

export async function beat(
  redis: Redis,
  redisPrefix: string,
  workerId: string,
  now = Date.now(),
  group: HeartbeatGroup = "workers",
): Promise<void> {
  await redis
    .multi()
    .set(epochKey(redisPrefix, group), String(now), "NX")
    .zadd(heartbeatKey(redisPrefix, group), now, workerId)
    .exec();
}

async function removeHeartbeat(
  redis: Redis,
  redisPrefix: string,
  workerId: string,
  group: HeartbeatGroup,
): Promise<void> {
  await redis.zrem(heartbeatKey(redisPrefix, group), workerId);
}

/** Worker ids that beat within the last `ttlMs`; prunes older entries on the way. */
export async function aliveWorkers(
  redis: Redis,
  redisPrefix: string,
  ttlMs: number,
  now = Date.now(),
): Promise<string[]> {
  const key = heartbeatKey(redisPrefix, "workers");
  await redis.zremrangebyscore(key, "-inf", `(${now - ttlMs}`);
  return redis.zrangebyscore(key, now - ttlMs, "+inf");
}

/**
 * Which of `ids` are known alive (beaten within `ttlMs`) and which known dead: not beaten within `ttlMs`
 * although the group's set has existed for at least `ttlMs` (see epochKey). An id in neither list is
 * unknown (the set is younger than the TTL); a Redis error rejects (callers then keep every holder:
 * wrongly releasing a live turn is worse than releasing a dead one late).
 */
export async function processLiveness(
  redis: Redis,
  redisPrefix: string,
  group: HeartbeatGroup,
  ids: readonly string[],
  ttlMs: number,
  now = Date.now(),
): Promise<{ alive: string[]; dead: string[] }> {
  if (ids.length === 0) return { alive: [], dead: [] };
  const [since, scores] = await Promise.all([
    redis.get(epochKey(redisPrefix, group)).then(Number),
    redis.zmscore(heartbeatKey(redisPrefix, group), ...ids),
  ]);
  const settled = Number.isFinite(since) && since !== 0 && now - since >= ttlMs;
  const alive: string[] = [];
  const dead: string[] = [];
  for (const [index, id] of ids.entries()) {
    const score = scores[index];
    const beaten = score !== null && score !== undefined && Number(score) >= now - ttlMs;
    if (beaten) alive.push(id);
    else if (settled) dead.push(id);
  }
  return { alive, dead };
}

/** Beats now and every `intervalMs` until stopped; `stop()` removes this process from the set. */
export function startHeartbeat(params: {
  redis: Redis;
  redisPrefix: string;
  workerId: string;
  intervalMs: number;
  onError: (error: unknown) => void;
  group?: HeartbeatGroup;
}): { ready: Promise<void>; stop(): Promise<void> } {
  const { redis, redisPrefix, workerId } = params;
  const group = params.group ?? "workers";
  const tick = () => beat(redis, redisPrefix, workerId, Date.now(), group).catch(params.onError);
  const ready = beat(redis, redisPrefix, workerId, Date.now(), group);
  const timer = setInterval(() => void tick(), params.intervalMs);
  timer.unref();
  return {
    ready,
    async stop() {
      clearInterval(timer);
      await removeHeartbeat(redis, redisPrefix, workerId, group).catch(params.onError);
    },
  };
}
