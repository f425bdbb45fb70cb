import type { Db } from "@/server/db";
import type { Redis } from "ioredis";
import type { QuotaConfig } from "@/server/config/quotas";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import { runMeteringFlush } from "@/server/modules/metering/metering-flush.service";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { JobProcessor } from "../registry";

export type MeteringFlushDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  redis: Redis;
  redisPrefix: string;
  quotas: QuotaConfig;
  requestStop: (payload: { tenantId: string; workspaceId: string; reason: string }) => Promise<unknown>;
  /** Where budget alerts are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
  /** Announces budget events to tenants' webhooks (the root's `berth.lifecycle`). */
  lifecycle: LifecycleEvents;
};

/** `metering.flush`: the usage buffer → the UsageRecord ledger, then the budgets (transport-thin). */
export function meteringFlushProcessor(
  deps: MeteringFlushDeps,
): JobProcessor<BerthJobCatalog, "metering.flush"> {
  return async ({ payload, log }) => {
    const result = await runMeteringFlush({ ...deps, log });
    if (result.written > 0 || result.unreadable > 0)
      log.info(
        { written: result.written, unreadable: result.unreadable, trigger: payload.trigger },
        "usage flushed",
      );
    return { written: result.written, accrued: result.accrued, budgets: result.budgets.length };
  };
}
