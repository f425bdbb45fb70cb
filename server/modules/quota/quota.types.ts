import { z } from "zod";
import type { QuotaLimits } from "@/server/config/quotas";
import { AppError } from "@/server/shared/errors";

export type QuotaLimitName = keyof QuotaLimits | "monthlyBudgetUnits";

/** What the dashboard says for each limit. */
export const QUOTA_LIMIT_LABELS: Record<QuotaLimitName, string> = {
  liveWorkspaces: "live workspaces",
  totalWorkspaces: "workspaces in total",
  concurrentTurns: "concurrent turns",
  provisionsPerMinute: "provisions per minute",
  warmClaimsPerMinute: "warm pool machines per minute",
  workspaceCpus: "CPUs per workspace",
  workspaceMemoryBytes: "memory per workspace",
  workspaceDiskBytes: "disk per workspace",
  mcpServersPerScope: "MCP servers per scope",
  skillStorageBytes: "skill storage",
  monthlyBudgetUnits: "monthly budget",
};

/**
 * A tenant's overrides (null: the installation's default), set by operators only
 * (`operator.tenants.setQuotaOverrides`, the CLI); 0 in a resource means "the backend's own setting".
 */
const limit = z.number().int().min(0).max(1_000_000_000).nullable().optional();
const byteLimit = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullable().optional();
export const ZQuotaOverrides = z
  .object({
    liveWorkspaces: limit,
    totalWorkspaces: limit,
    concurrentTurns: limit,
    provisionsPerMinute: limit,
    /** 0: no limit. */
    warmClaimsPerMinute: limit,
    workspaceCpus: z.number().min(0).max(1_024).nullable().optional(),
    workspaceMemoryBytes: byteLimit,
    workspaceDiskBytes: byteLimit,
    mcpServersPerScope: limit,
    skillStorageBytes: byteLimit,
  })
  .strict();
export type TQuotaOverrides = z.output<typeof ZQuotaOverrides>;

export const ZBudgetSettings = z
  .object({
    /** Units per calendar month (UTC), in the installation's BERTH_METERING_RATES units; null: no budget. */
    monthlyBudgetUnits: z.number().min(0).max(1e15).nullable(),
    alertPercents: z.array(z.number().int().min(1).max(1_000)).max(10).default([]),
    hardStop: z.boolean().default(false),
    stopWorkspaces: z.boolean().default(false),
  })
  .strict();
export type TBudgetSettings = z.output<typeof ZBudgetSettings>;

/** One limit against the tenant's use of it, for the Settings card. */
const ZQuotaUsageItem = z.object({
  limit: z.string(),
  label: z.string(),
  /** The effective value (override or default); 0 for a resource: the backend's own setting. */
  value: z.number(),
  overridden: z.boolean(),
  /** Current use, where it is countable (resources per workspace have none). */
  used: z.number().nullable(),
});
export type QuotaUsageItem = z.output<typeof ZQuotaUsageItem>;

export const ZTenantUsageView = z.object({
  limits: z.array(ZQuotaUsageItem),
  budget: z.object({
    monthlyBudgetUnits: z.number().nullable(),
    spentUnits: z.number(),
    alertPercents: z.array(z.number()),
    hardStop: z.boolean(),
    stopWorkspaces: z.boolean(),
    /** `YYYY-MM` (UTC). */
    month: z.string(),
  }),
  /** This month's metered quantities by kind (workspace_seconds, turn, input_tokens, ...). */
  usage: z.record(z.string(), z.number()),
});
export type TenantUsageView = z.output<typeof ZTenantUsageView>;

/** THE refusal of a quota or budget: says which limit, its value and the use that hit it. */
export function quotaExceeded(limit: QuotaLimitName, value: number, used: number): AppError {
  const label = QUOTA_LIMIT_LABELS[limit];
  return new AppError("QUOTA_EXCEEDED", `tenant quota ${limit} (${value}) reached: ${used} in use`, {
    userMessage:
      limit === "monthlyBudgetUnits"
        ? `The tenant's monthly budget (${value} units) is used up (${round(used)} spent).`
        : `The tenant's ${label} quota (${value}) is reached.`,
    details: { limit, value, used },
  });
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
