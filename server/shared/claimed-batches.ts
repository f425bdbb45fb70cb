import type { Redis } from "ioredis";

/**
 * A Redis list drained in claimed batches (the audit and metering buffers): `claimBatch` moves up to `size`
 * entries from the buffer to an in-flight list, atomically. If an in-flight batch already exists (a previous
 * flush crashed after claiming), that batch is returned again instead, so nothing claimed is ever lost: the
 * caller re-writes it (idempotent by id) and only then calls `ackBatch`.
 */
const CLAIM_SCRIPT = `
if redis.call('EXISTS', KEYS[2]) == 1 then return redis.call('LRANGE', KEYS[2], 0, -1) end
local items = redis.call('LPOP', KEYS[1], ARGV[1])
if not items then return {} end
redis.call('RPUSH', KEYS[2], unpack(items))
return items`;

// Deletes the in-flight list only if it still holds the batch we wrote (checked by its first entry,
// whose id is unique): a concurrent flush may already have acknowledged it and claimed the next one.
const ACK_SCRIPT = `
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

export async function claimBatch(
  redis: Redis,
  keys: { buffer: string; inflight: string },
  size: number,
): Promise<string[]> {
  return (await redis.eval(CLAIM_SCRIPT, 2, keys.buffer, keys.inflight, size)) as string[];
}

/** Acknowledges the claimed batch whose first entry is `first` (see claimBatch). */
export async function ackBatch(redis: Redis, inflightKey: string, first: string): Promise<void> {
  await redis.eval(ACK_SCRIPT, 1, inflightKey, first);
}
