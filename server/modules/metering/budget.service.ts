import type { Db, DbClient } from "@/server/db";
import type { MeteringRate, QuotaConfig } from "@/server/config/quotas";
import type { Logger } from "@/server/logger";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { getTenantQuota } from "@/server/modules/quota/quota.data";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import { claimBudgetAlert, listReadyWorkspaceIds, sumUsageSince } from "./metering.data";
import { monthOf, type UsageKind, type UsageSums } from "./metering.types";

/**
 * Budgets: a tenant's monthly spend is its ledger's quantities this UTC month priced by the installation's
 * rates (BERTH_METERING_RATES: units per backend, the `*` rate for the rest). The hard stop reads it before
 * a turn or a provision; the flush raises the threshold alerts once each (an audit event and a
 * `budget.threshold_reached` or, at 100 % or more, `budget.exhausted` webhook) and, when asked, stops
 * workspaces.
 * The ledger is buffered, so the spend lags real use by one flush (BERTH_METERING_FLUSH_MS at most).
 */
type Rates = QuotaConfig["rates"];

const PRICE: Record<UsageKind, (rate: MeteringRate) => number> = {
  workspace_seconds: (rate) => rate.workspaceHour / 3_600,
  provision: (rate) => rate.provision,
  turn: (rate) => rate.turn,
  input_tokens: (rate) => rate.inputTokensPerMillion / 1_000_000,
  output_tokens: (rate) => rate.outputTokensPerMillion / 1_000_000,
  tool_call: (rate) => rate.toolCall,
};

/** Units the summed usage costs. */
export function spendOf(sums: UsageSums, rates: Rates): number {
  let total = 0;
  for (const sum of sums) {
    const rate = (sum.backend ? rates[sum.backend] : undefined) ?? rates["*"];
    if (rate) total += sum.quantity * PRICE[sum.kind](rate);
  }
  return total;
}

export async function monthSpend(
  tenantId: string,
  rates: Rates,
  now = new Date(),
  db: DbClient,
): Promise<number> {
  return spendOf(await sumUsageSince(tenantId, monthOf(now).start, undefined, db), rates);
}

export type BudgetEvaluation = { tenantId: string; alerts: number[]; stopped: string[] };

/**
 * After a flush: for each tenant with a budget, every alert percentage crossed this month and not raised
 * yet becomes a tenant event (`budget.threshold` in the audit log) once; past 100 % with `budgetStopWorkspaces`
 * (and the hard stop) the tenant's READY workspaces are handed to `workspace.stop`.
 */
export async function evaluateBudgets(
  tenantIds: readonly string[],
  deps: {
    rates: Rates;
    requestStop: (payload: { tenantId: string; workspaceId: string; reason: string }) => Promise<unknown>;
    log: Logger;
    /** Where alerts are audited (the root's `berth.audit`). */
    audit: AuditRecorder;
    /** Announces `budget.threshold_reached` / `budget.exhausted` (the root's `berth.lifecycle`). */
    lifecycle: LifecycleEvents;
  },
  now = new Date(),
  db: Db,
): Promise<BudgetEvaluation[]> {
  const results: BudgetEvaluation[] = [];
  for (const tenantId of tenantIds) {
    const quota = await getTenantQuota(tenantId, db);
    const budget = quota.monthlyBudgetUnits;
    if (budget === null) continue;
    const spent = await monthSpend(tenantId, deps.rates, now, db);
    const percentUsed = budget === 0 ? Infinity : (spent / budget) * 100;
    const month = monthOf(now).label;
    const result: BudgetEvaluation = { tenantId, alerts: [], stopped: [] };
    for (const percent of quota.budgetAlertPercents) {
      if (percentUsed < percent) continue;
      if (!(await claimBudgetAlert({ tenantId, month, percent, spentUnits: spent, budgetUnits: budget }, db)))
        continue;
      result.alerts.push(percent);
      const scope = await resolveSystemTenantScope(tenantId, {}, db);
      await deps.audit.record(scope, {
        action: "budget.threshold",
        targetType: "tenant",
        targetId: tenantId,
        outcome: "success",
        details: { percent, month, spentUnits: spent, budgetUnits: budget },
      });
      // The tenant's lifecycle webhooks hear it too: an alert at 100 % or more says the budget is spent.
      deps.lifecycle.emit(tenantId, percent >= 100 ? "budget.exhausted" : "budget.threshold_reached", {
        percent,
        month,
        spentUnits: spent,
        budgetUnits: budget,
        hardStop: quota.budgetHardStop,
      });
    }
    if (percentUsed >= 100 && quota.budgetHardStop && quota.budgetStopWorkspaces) {
      for (const workspaceId of await listReadyWorkspaceIds(tenantId, db)) {
        await deps.requestStop({
          tenantId,
          workspaceId,
          reason: `monthly budget (${budget} units) exceeded`,
        });
        result.stopped.push(workspaceId);
      }
    }
    if (result.alerts.length > 0 || result.stopped.length > 0) deps.log.info(result, "budget evaluated");
    results.push(result);
  }
  return results;
}
