import type { Db } from "@/server/db";
import type { Redis } from "ioredis";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import type { TBufferedAuditEntry } from "@/server/modules/audit/audit-buffer.schema";
import type { JobProcessor } from "../registry";

export type AuditFlushDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  redis: Redis;
  redisPrefix: string;
  /** Defaults to the AuditLog table (tests may count or fail writes). */
  writeEntries?: (entries: TBufferedAuditEntry[]) => Promise<number>;
};

/**
 * `audit.flush`: drain the Redis audit buffer into the AuditLog table. Entries that can never be stored
 * are dead-lettered (counted in /api/health) instead of failing every later flush.
 */
export function auditFlushProcessor(deps: AuditFlushDeps): JobProcessor<BerthJobCatalog, "audit.flush"> {
  return async ({ payload, log }) => {
    const result = await flushAuditBuffer({
      ...deps,
      onDeadLetter: ({ raw, reason }) =>
        log.error({ raw, reason }, "set aside an audit entry it cannot store"),
    });
    if (result.written > 0 || result.deadLettered > 0) {
      log.info({ ...result, trigger: payload.trigger }, "audit entries flushed");
    }
    return result;
  };
}
