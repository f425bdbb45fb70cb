import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { changeBudget, readTenantUsage } from "@/server/modules/quota/quota-admin.service";
import { ZBudgetSettings, ZTenantUsageView } from "@/server/modules/quota/quota.types";

/**
 * The tenant's quotas, usage and budget. Reading is for admins, the budget for owners; the quota overrides
 * are set by operators (`operator.tenants.setQuotaOverrides`).
 */
export const quotaRouter = createTRPCRouter({
  /** Every limit with its value and the tenant's use of it, and this month's spend and metered usage. */
  usage: tenantProcedureFor("workspace:manage")
    .input(ZTenantInput)
    .output(ZTenantUsageView)
    .query(({ ctx }) => readTenantUsage(ctx.scope, ctx.berth.quota, ctx.berth.db)),

  /** The monthly budget (units of BERTH_METERING_RATES), alert percentages and hard stop. */
  setBudget: tenantProcedureFor("tenant:manage")
    .input(ZTenantInput.extend(ZBudgetSettings.shape))
    .output(ZTenantUsageView)
    .mutation(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...budget } }) =>
      changeBudget(ctx.scope, budget, ctx.berth.quota, ctx.berth.audit, ctx.berth.db),
    ),
});
