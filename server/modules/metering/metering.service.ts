import type { Db } from "@/server/db";
import type { Redis } from "ioredis";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import type { QueueSet } from "@/server/queue/queues";
import { redisKey } from "@/server/redis";
import { insertUsageRecords } from "./metering.data";
import { ZUsageEntry, type TUsageEntry, type UsageInput } from "./metering.types";
import { ackBatch, claimBatch } from "@/server/shared/claimed-batches";
import { parseJsonOrNull } from "@/server/shared/json";

/**
 * Metering off the hot path, like the audit buffer: a turn or a provision appends its usage to a Redis
 * list (one RPUSH) and asks for a deduplicated `metering.flush`; the flush moves the list into the
 * UsageRecord ledger in batches, idempotent by entry id, and then evaluates the tenants' budgets.
 */
export type MeteringBufferDeps = {
  redis: Redis;
  redisPrefix: string;
  requestFlush: () => Promise<unknown>;
};

/** The buffer over a root's Redis connection and queues (a flush request is deduplicated while pending). */
export function meteringBufferDeps(redis: Redis, queues: QueueSet<BerthJobCatalog>): MeteringBufferDeps {
  const enqueue = createEnqueue(queues);
  return {
    redis,
    redisPrefix: queues.redisPrefix,
    requestFlush: () =>
      enqueue("metering.flush", { trigger: "write" }, { deduplicationId: "metering.flush" }),
  };
}

/** Buffers usage over one Redis and queue set (the root's `berth.usage`). */
export type UsageRecorder = { record(entries: readonly UsageInput[]): Promise<void> };

/** A recorder over `deps` (built on the first record). */
export function usageRecorder(deps: () => MeteringBufferDeps): UsageRecorder {
  return { record: async (entries) => recordUsage(entries, deps()) };
}

const bufferKey = (prefix: string) => redisKey(prefix, "metering", "buffer");
const inflightKey = (prefix: string) => redisKey(prefix, "metering", "inflight");

/** Buffers usage for the next flush. Entries with a zero quantity are dropped (nothing to count). */
async function recordUsage(entries: readonly UsageInput[], deps: MeteringBufferDeps): Promise<void> {
  const now = new Date();
  const lines = entries
    .filter((entry) => entry.quantity > 0)
    .map((entry) =>
      JSON.stringify(ZUsageEntry.parse({ ...entry, id: crypto.randomUUID(), at: entry.at ?? now })),
    );
  if (lines.length === 0) return;
  await deps.redis.rpush(bufferKey(deps.redisPrefix), ...lines);
  await deps.requestFlush();
}

export type MeteringFlushResult = {
  written: number;
  batches: number;
  unreadable: number;
  tenantIds: string[];
};

/** Drains the buffer into the ledger. Safe to run concurrently and to retry after a crash. */
export async function flushMeteringBuffer(
  deps: Pick<MeteringBufferDeps, "redis" | "redisPrefix"> & {
    write?: (entries: TUsageEntry[]) => Promise<number>;
    batchSize?: number;
    maxBatches?: number;
  },
  db: Db,
): Promise<MeteringFlushResult> {
  const keys = { buffer: bufferKey(deps.redisPrefix), inflight: inflightKey(deps.redisPrefix) };
  const write = deps.write ?? ((entries: TUsageEntry[]) => insertUsageRecords(entries, db));
  const tenantIds = new Set<string>();
  let written = 0;
  let batches = 0;
  let unreadable = 0;
  while (batches < (deps.maxBatches ?? 20)) {
    const raw = await claimBatch(deps.redis, keys, deps.batchSize ?? 1_000);
    if (raw.length === 0) break;
    const entries: TUsageEntry[] = [];
    for (const line of raw) {
      const parsed = ZUsageEntry.safeParse(parseJsonOrNull(line));
      // Only this module writes the buffer, so an unreadable line is a bug: counted, never blocking.
      if (parsed.success) entries.push(parsed.data);
      else unreadable += 1;
    }
    written += await write(entries);
    for (const entry of entries) tenantIds.add(entry.tenantId);
    await ackBatch(deps.redis, keys.inflight, raw[0]!);
    batches += 1;
  }
  return { written, batches, unreadable, tenantIds: [...tenantIds] };
}
