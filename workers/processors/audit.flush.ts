import type { Redis } from "ioredis";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import type { TBufferedAuditEntry } from "@/server/modules/audit/audit-buffer.schema";
import type { JobProcessor } from "../registry";

export type AuditFlushDeps = {
  redis: Redis;
  redisPrefix: string;
  /** Defaults to the AuditLog table (tests may count or fail writes). */
  writeEntries?: (entries: TBufferedAuditEntry[]) => Promise<number>;
};

/** `audit.flush`: drain the Redis audit buffer into the AuditLog table. */
export function auditFlushProcessor(deps: AuditFlushDeps): JobProcessor<BerthJobCatalog, "audit.flush"> {
  return async ({ payload, log }) => {
    const result = await flushAuditBuffer({
      ...deps,
      onInvalidEntry: (raw, reason) => log.error({ raw, reason }, "dropped an unreadable audit entry"),
    });
    if (result.written > 0) log.info({ ...result, trigger: payload.trigger }, "audit entries flushed");
    return result;
  };
}
