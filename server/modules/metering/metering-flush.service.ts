import type { Db } from "@/server/db";
import type { Redis } from "ioredis";
import type { QuotaConfig } from "@/server/config/quotas";
import type { Logger } from "@/server/logger";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import { accrueRunningWorkspaces } from "@/server/modules/workspace/workspace-metering.data";
import { evaluateBudgets, type BudgetEvaluation } from "./budget.service";
import { flushMeteringBuffer, type MeteringFlushResult } from "./metering.service";

/** Running workspaces' seconds are accrued at least this often (a stop accrues the rest at once). */
const ACCRUAL_EVERY_MS = 5 * 60_000;

/**
 * `metering.flush`: accrue long-running workspaces, drain the usage buffer into the ledger, then evaluate
 * the budgets of the tenants whose usage it wrote (alerts once, stops when asked).
 */
export async function runMeteringFlush(deps: {
  /** The process' database client (the Berth root's). */
  db: Db;
  redis: Redis;
  redisPrefix: string;
  quotas: QuotaConfig;
  requestStop: (payload: { tenantId: string; workspaceId: string; reason: string }) => Promise<unknown>;
  log: Logger;
  /** Where budget alerts are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
  /** Announces budget events to tenants' webhooks (the root's `berth.lifecycle`). */
  lifecycle: LifecycleEvents;
}): Promise<MeteringFlushResult & { accrued: number; budgets: BudgetEvaluation[] }> {
  const { db } = deps;
  const accrued = await accrueRunningWorkspaces(new Date(Date.now() - ACCRUAL_EVERY_MS), 500, db);
  const flushed = await flushMeteringBuffer(deps, db);
  const budgets = await evaluateBudgets(
    flushed.tenantIds,
    {
      rates: deps.quotas.rates,
      requestStop: deps.requestStop,
      log: deps.log,
      audit: deps.audit,
      lifecycle: deps.lifecycle,
    },
    undefined,
    db,
  );
  return { ...flushed, accrued, budgets };
}
