import type { Db } from "@/server/db";
import type { z } from "zod";
import type { Redis } from "ioredis";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import type { QueueSet } from "@/server/queue/queues";
import { redisKey } from "@/server/redis";
import { AppError, isAppError } from "@/server/shared/errors";
import { currentRequestMeta } from "@/server/shared/request-meta";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import { actorOfScope, type TenantScope } from "@/server/auth/scope";
import { sanitizeStrings } from "@/server/shared/unsafe-strings";
import { appendAuditLogs, isRejectedAuditWrite } from "./audit.data";
import { ZBufferedAuditEntry, type TBufferedAuditEntry } from "./audit-buffer.schema";
import { ZAuditEntryInput, type TAuditEntryInput } from "./audit.types";
import { ackBatch, claimBatch } from "@/server/shared/claimed-batches";
import { parseJsonOrNull } from "@/server/shared/json";

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

/** The buffer over a root's Redis connection and queues. */
export function auditBufferDeps(redis: Redis, queues: QueueSet<BerthJobCatalog>): AuditBufferDeps {
  const enqueue = createEnqueue(queues);
  return {
    redis,
    redisPrefix: queues.redisPrefix,
    // Deduplicated while a flush is pending or running: a burst of writes costs one job.
    requestFlush: () => enqueue("audit.flush", { trigger: "write" }, { deduplicationId: "audit.flush" }),
  };
}

/** Buffers audit entries over one Redis and queue set (the root's `berth.audit`; see `recordAudit`). */
export type AuditRecorder = {
  record(scope: TenantScope, entry: TAuditEntryInput): Promise<{ id: string }>;
};

/** A recorder over `deps` (resolved at each record, so building the recorder opens nothing). */
export function auditRecorder(deps: () => AuditBufferDeps): AuditRecorder {
  return { record: async (scope, entry) => recordAudit(scope, entry, deps()) };
}

function bufferKey(prefix: string): string {
  return redisKey(prefix, "audit", "buffer");
}
function inflightKey(prefix: string): string {
  return redisKey(prefix, "audit", "inflight");
}
/** Entries the flush could not store (kept for an operator, newest last) and how many ever were. */
function deadLetterKey(prefix: string): string {
  return redisKey(prefix, "audit", "dead");
}
function deadLetterCountKey(prefix: string): string {
  return redisKey(prefix, "audit", "dead", "count");
}

/** The newest dead letters kept; older ones are trimmed (the count still says how many there were). */
const MAX_DEAD_LETTERS = 10_000;

/**
 * Buffers one audit entry for the next flush (same input as `appendAuditLog`, which writes
 * synchronously, e.g. inside the transaction of the change). Throws BAD_REQUEST for an invalid entry.
 */
export async function recordAudit(
  scope: TenantScope,
  entry: TAuditEntryInput,
  deps: AuditBufferDeps,
): Promise<{ id: string }> {
  // A caller's string (a NUL in a session id, a lone surrogate in a user agent) is audited as far as it can
  // be stored, with those characters replaced, rather than poisoning the buffer for everyone.
  const parsed = ZAuditEntryInput.safeParse(sanitizeStrings(entry));
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

export type FlushDeps = {
  /** The process' database client (the Berth root's), for the default writer. */
  db: Db;
  redis: Redis;
  redisPrefix: string;
  /** Inserts entries, skipping ids that already exist; returns the rows inserted. Default: writeBufferedAuditEntries. */
  writeEntries?: (entries: TBufferedAuditEntry[]) => Promise<number>;
  /** Called for each entry set aside (unreadable, or refused by the database), after it was dead-lettered. */
  onDeadLetter?: (entry: { raw: string; reason: string }) => void;
  batchSize?: number;
  /** Bound on the batches per flush, so one job never runs unboundedly under a write storm. */
  maxBatches?: number;
};

export type FlushResult = { written: number; batches: number; deadLettered: number };

/**
 * Drains the buffer into the database. Safe to run concurrently and to retry after a crash. An entry that
 * can never be stored (unreadable, or refused by the database for its content) is moved to the dead-letter
 * list instead of failing the batch, so one bad entry never blocks the audit log of every tenant; an outage
 * (connection, timeout) still fails the flush, and the claimed batch is retried whole.
 */
export async function flushAuditBuffer(deps: FlushDeps): Promise<FlushResult> {
  const keys = { buffer: bufferKey(deps.redisPrefix), inflight: inflightKey(deps.redisPrefix) };
  const batchSize = deps.batchSize ?? 500;
  const write =
    deps.writeEntries ?? ((entries: TBufferedAuditEntry[]) => writeBufferedAuditEntries(entries, deps.db));
  let written = 0;
  let batches = 0;
  let deadLettered = 0;
  const setAside = async (raw: string, reason: string) => {
    await deadLetter(deps, raw, reason);
    deadLettered += 1;
    deps.onDeadLetter?.({ raw: raw.slice(0, 200), reason });
  };
  while (batches < (deps.maxBatches ?? 20)) {
    const raw = await claimBatch(deps.redis, keys, batchSize);
    if (raw.length === 0) break;
    const entries: { raw: string; entry: TBufferedAuditEntry }[] = [];
    for (const line of raw) {
      // Sanitised again here: entries buffered before record-time sanitising may still hold a NUL.
      const parsed = ZBufferedAuditEntry.safeParse(sanitizeStrings(parseJsonOrNull(line)));
      if (parsed.success) entries.push({ raw: line, entry: parsed.data });
      else await setAside(line, `unreadable: ${parsed.error.message.slice(0, 300)}`);
    }
    written += await writeOrSetAside(entries, write, setAside);
    await ackBatch(deps.redis, keys.inflight, raw[0]!);
    batches += 1;
  }
  return { written, batches, deadLettered };
}

/**
 * Writes the entries; when the database refuses the batch for its content, halves it until the entries it
 * refuses are found (one bad entry among n costs about 2·log2(n) writes) and sets exactly those aside.
 */
async function writeOrSetAside(
  entries: { raw: string; entry: TBufferedAuditEntry }[],
  write: (entries: TBufferedAuditEntry[]) => Promise<number>,
  setAside: (raw: string, reason: string) => Promise<void>,
): Promise<number> {
  if (entries.length === 0) return 0;
  try {
    return await write(entries.map(({ entry }) => entry));
  } catch (error) {
    if (!isRejectedAuditWrite(error)) throw error;
    if (entries.length === 1) {
      await setAside(entries[0]!.raw, `refused by the database: ${describeRejection(error)}`);
      return 0;
    }
    const middle = Math.ceil(entries.length / 2);
    return (
      (await writeOrSetAside(entries.slice(0, middle), write, setAside)) +
      (await writeOrSetAside(entries.slice(middle), write, setAside))
    );
  }
}

function describeRejection(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message.split("\n").filter(Boolean).at(-1) : String(error);
  return `${typeof code === "string" ? `${code} ` : ""}${(message ?? "").slice(0, 300)}`;
}

async function deadLetter(deps: { redis: Redis; redisPrefix: string }, raw: string, reason: string) {
  const record = JSON.stringify({ at: new Date().toISOString(), reason, entry: raw });
  await deps.redis
    .multi()
    .rpush(deadLetterKey(deps.redisPrefix), record)
    .ltrim(deadLetterKey(deps.redisPrefix), -MAX_DEAD_LETTERS, -1)
    .incr(deadLetterCountKey(deps.redisPrefix))
    .exec();
}

/** How many audit entries were ever set aside, and the newest ones (raw, with why), for operators. */
export async function auditDeadLetters(
  redis: Redis,
  redisPrefix: string,
  options: { limit?: number } = {},
): Promise<{ total: number; kept: number; newest: { at: string; reason: string; entry: string }[] }> {
  const limit = Math.min(Math.max(options.limit ?? 20, 0), 200);
  const [total, kept, newest] = await Promise.all([
    redis.get(deadLetterCountKey(redisPrefix)),
    redis.llen(deadLetterKey(redisPrefix)),
    limit === 0 ? Promise.resolve([]) : redis.lrange(deadLetterKey(redisPrefix), -limit, -1),
  ]);
  return {
    total: Number(total ?? 0),
    kept,
    newest: newest.map((line) => JSON.parse(line) as { at: string; reason: string; entry: string }),
  };
}

/**
 * Writes claimed entries through `appendAuditLogs`, one call per tenant, each entry with the id it was given
 * when buffered (so a retry inserts nothing twice). Entries of a tenant that no longer exists are dropped:
 * its audit rows were cascaded away, and writing them would fail the batch forever. Returns rows inserted.
 */
export async function writeBufferedAuditEntries(entries: TBufferedAuditEntry[], db: Db): Promise<number> {
  const byTenant = new Map<string, TBufferedAuditEntry[]>();
  for (const entry of entries) {
    const group = byTenant.get(entry.tenantId);
    if (group) group.push(entry);
    else byTenant.set(entry.tenantId, [entry]);
  }
  let written = 0;
  for (const [tenantId, group] of byTenant) {
    const scope = await resolveSystemTenantScope(tenantId, { allowSuspended: true }, db).catch(
      (error: unknown) => {
        if (isAppError(error) && error.code === "NOT_FOUND") return null;
        throw error;
      },
    );
    if (!scope) continue;
    written += await appendAuditLogs(
      scope,
      group.map(({ tenantId: _tenant, actorType, actorId, ...entry }) => ({
        ...entry,
        // The actor was fixed when the action happened, not the flush's system scope.
        actor: { type: actorType, id: actorId },
      })),
      db,
    );
  }
  return written;
}

/** Entries waiting for a flush (for health/diagnostics and tests). */
export async function pendingAuditEntries(redis: Redis, redisPrefix: string): Promise<number> {
  const [buffered, inflight] = await Promise.all([
    redis.llen(bufferKey(redisPrefix)),
    redis.llen(inflightKey(redisPrefix)),
  ]);
  return buffered + inflight;
}
