import type { z } from "zod";
import type { Redis } from "ioredis";
import { enqueue } from "@/server/queue/enqueue";
import { getQueues } from "@/server/queue/queues";
import { getRedis, redisKey } from "@/server/redis";
import { AppError, isAppError } from "@/server/shared/errors";
import { currentRequestMeta } from "@/server/shared/request-meta";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import { actorOfScope, type TenantScope } from "@/server/auth/scope";
import { appendAuditLogs } from "./audit.data";
import { ZBufferedAuditEntry, type TBufferedAuditEntry } from "./audit-buffer.schema";
import { ZAuditEntryInput, type TAuditEntryInput } from "./audit.types";

/**
 * Audit writes are on every mutation's path, so the API only appends to a Redis list (one RPUSH) and
 * asks for a flush; the `audit.flush` job moves the list into the AuditLog table in batches.
 */
export type AuditBufferDeps = {
  redis: Redis;
  redisPrefix: string;
  /** Requests an `audit.flush` (deduplicated: many writes while a flush is pending → one flush). */
  requestFlush: () => Promise<unknown>;
};

/** The process-wide Redis connection and queues (composition defaults; tests pass their own). */
export function defaultAuditBufferDeps(): AuditBufferDeps {
  const queues = getQueues();
  return {
    redis: getRedis(),
    redisPrefix: queues.redisPrefix,
    // Deduplicated while a flush is pending or running: a burst of writes costs one job.
    requestFlush: () => enqueue("audit.flush", { trigger: "write" }, { deduplicationId: "audit.flush" }),
  };
}

function bufferKey(prefix: string): string {
  return redisKey(prefix, "audit", "buffer");
}
function inflightKey(prefix: string): string {
  return redisKey(prefix, "audit", "inflight");
}

/**
 * Buffers one audit entry for the next flush (same input as `appendAuditLog`, which writes
 * synchronously, e.g. inside the transaction of the change). Throws BAD_REQUEST for an invalid entry.
 */
export async function recordAudit(
  scope: TenantScope,
  entry: TAuditEntryInput,
  deps: AuditBufferDeps = defaultAuditBufferDeps(),
): Promise<{ id: string }> {
  const parsed = ZAuditEntryInput.safeParse(entry);
  if (!parsed.success) throw new AppError("BAD_REQUEST", `invalid audit entry: ${parsed.error.message}`);
  const { actor: explicitActor, at, ...rest } = parsed.data;
  const actor = explicitActor ?? actorOfScope(scope);
  const request = currentRequestMeta(); // the HTTP caller's address and user agent, when there is one
  const buffered: z.input<typeof ZBufferedAuditEntry> = {
    ...rest,
    ip: rest.ip ?? request?.ip ?? null,
    userAgent: rest.userAgent ?? request?.userAgent ?? null,
    id: crypto.randomUUID(),
    tenantId: scope.tenantId,
    actorType: actor.type,
    actorId: actor.id,
    at: (at ?? new Date()).toISOString(),
  };
  await deps.redis.rpush(bufferKey(deps.redisPrefix), JSON.stringify(buffered));
  await deps.requestFlush();
  return { id: buffered.id };
}

// Moves up to ARGV[1] entries from the buffer to the in-flight list, atomically. If an in-flight batch
// already exists (a previous flush crashed after claiming), that batch is returned again instead, so
// nothing claimed is ever lost: it is re-written (idempotent by id) and only then acknowledged.
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

export type FlushDeps = {
  redis: Redis;
  redisPrefix: string;
  /** Inserts entries, skipping ids that already exist; returns the rows inserted. Default: writeBufferedAuditEntries. */
  writeEntries?: (entries: TBufferedAuditEntry[]) => Promise<number>;
  onInvalidEntry?: (raw: string, reason: string) => void;
  batchSize?: number;
  /** Bound on the batches per flush, so one job never runs unboundedly under a write storm. */
  maxBatches?: number;
};

/** Drains the buffer into the database. Safe to run concurrently and to retry after a crash. */
export async function flushAuditBuffer(deps: FlushDeps): Promise<{ written: number; batches: number }> {
  const keys = [bufferKey(deps.redisPrefix), inflightKey(deps.redisPrefix)];
  const batchSize = deps.batchSize ?? 500;
  let written = 0;
  let batches = 0;
  while (batches < (deps.maxBatches ?? 20)) {
    const raw = (await deps.redis.eval(CLAIM_SCRIPT, 2, ...keys, batchSize)) as string[];
    if (raw.length === 0) break;
    const entries: TBufferedAuditEntry[] = [];
    for (const line of raw) {
      const parsed = ZBufferedAuditEntry.safeParse(safeJson(line));
      // A corrupt entry can never be written; dropping it (logged) keeps it from blocking the buffer.
      if (parsed.success) entries.push(parsed.data);
      else deps.onInvalidEntry?.(line.slice(0, 200), parsed.error.message);
    }
    if (entries.length > 0) written += await (deps.writeEntries ?? writeBufferedAuditEntries)(entries);
    await deps.redis.eval(ACK_SCRIPT, 1, keys[1]!, raw[0]!);
    batches += 1;
  }
  return { written, batches };
}

/**
 * Writes claimed entries through `appendAuditLogs`, one call per tenant, each entry with the id it was given
 * when buffered (so a retry inserts nothing twice). Entries of a tenant that no longer exists are dropped:
 * its audit rows were cascaded away, and writing them would fail the batch forever. Returns rows inserted.
 */
export async function writeBufferedAuditEntries(entries: TBufferedAuditEntry[]): Promise<number> {
  const byTenant = new Map<string, TBufferedAuditEntry[]>();
  for (const entry of entries) {
    const group = byTenant.get(entry.tenantId);
    if (group) group.push(entry);
    else byTenant.set(entry.tenantId, [entry]);
  }
  let written = 0;
  for (const [tenantId, group] of byTenant) {
    const scope = await resolveSystemTenantScope(tenantId).catch((error: unknown) => {
      if (isAppError(error) && error.code === "NOT_FOUND") return null;
      throw error;
    });
    if (!scope) continue;
    written += await appendAuditLogs(
      scope,
      group.map(({ tenantId: _tenant, actorType, actorId, ...entry }) => ({
        ...entry,
        // The actor was fixed when the action happened, not the flush's system scope.
        actor: { type: actorType, id: actorId },
      })),
    );
  }
  return written;
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** Entries waiting for a flush (for health/diagnostics and tests). */
export async function pendingAuditEntries(redis: Redis, redisPrefix: string): Promise<number> {
  const [buffered, inflight] = await Promise.all([
    redis.llen(bufferKey(redisPrefix)),
    redis.llen(inflightKey(redisPrefix)),
  ]);
  return buffered + inflight;
}
