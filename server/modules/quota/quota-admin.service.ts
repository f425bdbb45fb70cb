import type { Db } from "@/server/db";
import type { QuotaLimits } from "@/server/config/quotas";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { audited } from "@/server/modules/audit/audited";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { spendOf } from "@/server/modules/metering/budget.service";
import { sumUsageSince } from "@/server/modules/metering/metering.data";
import { monthOf } from "@/server/modules/metering/metering.types";
import { parseInput } from "@/server/shared/parse-input";
import { admitProvisionInWindow, admitWarmClaimInWindow, countHeldTurns } from "./quota-counters";
import { countLiveWorkspaces, countTotalWorkspaces, getTenantQuota, saveBudgetSettings } from "./quota.data";
import { effectiveLimits, type QuotaDeps } from "./quota.service";
import {
  QUOTA_LIMIT_LABELS,
  ZBudgetSettings,
  type QuotaUsageItem,
  type TBudgetSettings,
  type TenantUsageView,
} from "./quota.types";

/**
 * The tenant's quotas and budget as its admins see them (usage against each limit, this month's spend),
 * and the owner's budget. The quota overrides are an operator's (operator/tenant-quota.service.ts).
 */
export async function readTenantUsage(scope: TenantScope, deps: QuotaDeps, db: Db): Promise<TenantUsageView> {
  assertCan(scope, "workspace:manage");
  const tenantId = scope.tenantId;
  const row = await getTenantQuota(tenantId, db);
  const limits = effectiveLimits(row, deps.config.defaults);
  const month = monthOf(new Date());
  const [live, total, turns, provisions, warmClaims, sums] = await Promise.all([
    countLiveWorkspaces(tenantId, undefined, db),
    countTotalWorkspaces(tenantId, db),
    countHeldTurns(deps, tenantId),
    admitProvisionInWindow(deps, tenantId, Number.MAX_SAFE_INTEGER, { consume: false }),
    admitWarmClaimInWindow(deps, tenantId, Number.MAX_SAFE_INTEGER, { consume: false }),
    sumUsageSince(tenantId, month.start, undefined, db),
  ]);
  const used: Partial<Record<keyof QuotaLimits, number>> = {
    liveWorkspaces: live,
    totalWorkspaces: total,
    concurrentTurns: turns,
    provisionsPerMinute: provisions.count,
    warmClaimsPerMinute: warmClaims.count,
  };
  const items: QuotaUsageItem[] = (Object.keys(limits) as (keyof QuotaLimits)[]).map((limit) => ({
    limit,
    label: QUOTA_LIMIT_LABELS[limit],
    value: limits[limit],
    overridden: row[limit] !== null && row[limit] !== undefined,
    used: used[limit] ?? null,
  }));
  const usage: Record<string, number> = {};
  for (const sum of sums) usage[sum.kind] = (usage[sum.kind] ?? 0) + sum.quantity;
  return {
    limits: items,
    budget: {
      monthlyBudgetUnits: row.monthlyBudgetUnits,
      spentUnits: spendOf(sums, deps.config.rates),
      alertPercents: row.budgetAlertPercents,
      hardStop: row.budgetHardStop,
      stopWorkspaces: row.budgetStopWorkspaces,
      month: month.label,
    },
    usage,
  };
}

/** Owners: the monthly budget, its alert percentages and its hard stop. Audited. */
export async function changeBudget(
  scope: TenantScope,
  raw: TBudgetSettings,
  deps: QuotaDeps,
  /** Where the change is audited (the root's `berth.audit`). */
  audit: AuditRecorder,
  db: Db,
): Promise<TenantUsageView> {
  assertCan(scope, "tenant:manage");
  const budget = parseInput(ZBudgetSettings, raw);
  await audited(
    audit,
    scope,
    { action: "budget.update", targetType: "tenant", targetId: scope.tenantId, details: budget },
    () => saveBudgetSettings(scope.tenantId, budget, db),
  );
  return readTenantUsage(scope, deps, db);
}
