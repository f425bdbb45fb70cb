import type { Redis } from "ioredis";
import { redisKey } from "@/server/redis";

/**
 * The quotas that count events in time rather than rows (concurrent turns, provisions and warm pool claims
 * per minute), as Redis sorted sets changed by Lua scripts: the check and the add are one atomic step on the
 * Redis server, so any number of API replicas and workers admitting at once never pass the limit. Scores are
 * Redis' own clock (TIME), so replicas with skewed clocks agree.
 */

// KEYS[1] = set, ARGV = limit, member, ttl ms. Members are turns, scored by their expiry: a crashed
// replica's turns drop out when their renewals stop. Returns { admitted (0/1), count }.
const ADMIT_HELD = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local count = redis.call('ZCARD', KEYS[1])
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then return {1, count} end
if count >= tonumber(ARGV[1]) then return {0, count} end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return {1, count + 1}`;

// Renews a held member's expiry (only if still held).
const RENEW_HELD = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local ok = redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return ok`;

// KEYS[1] = set, ARGV = limit, member, window ms, consume (0/1). Members scored by when they happened.
const ADMIT_WINDOW = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[1]) then return {0, count} end
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[1], now, ARGV[2])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
  count = count + 1
end
return {1, count}`;

const COUNT_HELD = `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
return redis.call('ZCOUNT', KEYS[1], now, '+inf')`;

export type QuotaCounterDeps = { redis: Redis; redisPrefix: string };

const turnsKey = (deps: QuotaCounterDeps, tenantId: string) =>
  redisKey(deps.redisPrefix, "quota", "turns", tenantId);
const provisionsKey = (deps: QuotaCounterDeps, tenantId: string) =>
  redisKey(deps.redisPrefix, "quota", "provisions", tenantId);

const warmClaimsKey = (deps: QuotaCounterDeps, tenantId: string) =>
  redisKey(deps.redisPrefix, "quota", "warm-claims", tenantId);

const PROVISION_WINDOW_MS = 60_000;

export async function admitHeldTurn(
  deps: QuotaCounterDeps,
  tenantId: string,
  turnId: string,
  limit: number,
  ttlMs: number,
): Promise<{ admitted: boolean; count: number }> {
  const [admitted, count] = (await deps.redis.eval(
    ADMIT_HELD,
    1,
    turnsKey(deps, tenantId),
    limit,
    turnId,
    ttlMs,
  )) as [number, number];
  return { admitted: admitted === 1, count };
}

export async function renewHeldTurn(deps: QuotaCounterDeps, tenantId: string, turnId: string, ttlMs: number) {
  await deps.redis.eval(RENEW_HELD, 1, turnsKey(deps, tenantId), turnId, ttlMs);
}

export async function releaseHeldTurn(deps: QuotaCounterDeps, tenantId: string, turnId: string) {
  await deps.redis.zrem(turnsKey(deps, tenantId), turnId);
}

export async function countHeldTurns(deps: QuotaCounterDeps, tenantId: string): Promise<number> {
  return Number(await deps.redis.eval(COUNT_HELD, 1, turnsKey(deps, tenantId)));
}

async function admitInWindow(
  deps: QuotaCounterDeps,
  key: string,
  limit: number,
  options: { consume: boolean; member?: string },
): Promise<{ admitted: boolean; count: number }> {
  const [admitted, count] = (await deps.redis.eval(
    ADMIT_WINDOW,
    1,
    key,
    limit,
    options.member ?? crypto.randomUUID(),
    PROVISION_WINDOW_MS,
    options.consume ? "1" : "0",
  )) as [number, number];
  return { admitted: admitted === 1, count };
}

/** Admits (and with `consume`, counts) one provision in the sliding minute. */
export async function admitProvisionInWindow(
  deps: QuotaCounterDeps,
  tenantId: string,
  limit: number,
  options: { consume: boolean; member?: string },
): Promise<{ admitted: boolean; count: number }> {
  return admitInWindow(deps, provisionsKey(deps, tenantId), limit, options);
}

/**
 * Admits (and with `consume`, counts as `member`) one warm pool machine in the sliding minute: the same
 * window as provisions, a set of its own.
 */
export async function admitWarmClaimInWindow(
  deps: QuotaCounterDeps,
  tenantId: string,
  limit: number,
  options: { consume: boolean; member?: string },
): Promise<{ admitted: boolean; count: number }> {
  return admitInWindow(deps, warmClaimsKey(deps, tenantId), limit, options);
}

/** Gives back a warm claim counted by `admitWarmClaimInWindow` that bound no machine after all. */
export async function releaseWarmClaim(deps: QuotaCounterDeps, tenantId: string, member: string) {
  await deps.redis.zrem(warmClaimsKey(deps, tenantId), member);
}

const RELEASE_LOCK = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/**
 * Runs `fn` holding a per-key Redis lock (SET NX PX), for quotas whose use lives outside the database
 * (MCP declarations in a workspace's `.mcp`): count and add happen under it, so replicas never both add
 * the last allowed one. Waits up to `waitMs` for the lock (UNAVAILABLE-free: callers get the refusal or go).
 */
export async function withQuotaLock<T>(
  deps: QuotaCounterDeps,
  key: string,
  fn: () => Promise<T>,
  options: { ttlMs?: number; waitMs?: number } = {},
): Promise<T> {
  const lockKey = redisKey(deps.redisPrefix, "quota", "lock", key);
  const token = crypto.randomUUID();
  const deadline = Date.now() + (options.waitMs ?? 30_000);
  for (let delay = 10; ; delay = Math.min(delay * 2, 250)) {
    if ((await deps.redis.set(lockKey, token, "PX", options.ttlMs ?? 60_000, "NX")) === "OK") break;
    if (Date.now() > deadline) throw new Error(`quota lock ${key} not acquired in time`);
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
  try {
    return await fn();
  } finally {
    await deps.redis.eval(RELEASE_LOCK, 1, lockKey, token);
  }
}
