import type { Prisma } from "@/generated/prisma/client";
import { type DbClient } from "@/server/db";
import type { TBudgetSettings, TQuotaOverrides } from "./quota.types";

/**
 * The TenantQuota rows: a tenant's overrides and budget, and the per-tenant lock that makes counting
 * quotas atomic (every admission that counts rows takes `FOR UPDATE` on the tenant's row first, so two
 * replicas or workers admitting at once are serialised and the second sees the first's row).
 */

export type TenantQuotaRow = TQuotaOverrides & {
  monthlyBudgetUnits: number | null;
  budgetAlertPercents: number[];
  budgetHardStop: boolean;
  budgetStopWorkspaces: boolean;
};

type RawRow = {
  live_workspaces: number | null;
  total_workspaces: number | null;
  concurrent_turns: number | null;
  provisions_per_minute: number | null;
  warm_claims_per_minute: number | null;
  workspace_cpus: number | null;
  workspace_memory_bytes: bigint | null;
  workspace_disk_bytes: bigint | null;
  mcp_servers_per_scope: number | null;
  skill_storage_bytes: bigint | null;
  monthly_budget_units: number | null;
  budget_alert_percents: number[];
  budget_hard_stop: boolean;
  budget_stop_workspaces: boolean;
};

const num = (value: bigint | null): number | null => (value === null ? null : Number(value));

function fromRaw(row: RawRow | undefined): TenantQuotaRow {
  if (!row)
    return {
      monthlyBudgetUnits: null,
      budgetAlertPercents: [],
      budgetHardStop: false,
      budgetStopWorkspaces: false,
    };
  return {
    liveWorkspaces: row.live_workspaces,
    totalWorkspaces: row.total_workspaces,
    concurrentTurns: row.concurrent_turns,
    provisionsPerMinute: row.provisions_per_minute,
    warmClaimsPerMinute: row.warm_claims_per_minute,
    workspaceCpus: row.workspace_cpus,
    workspaceMemoryBytes: num(row.workspace_memory_bytes),
    workspaceDiskBytes: num(row.workspace_disk_bytes),
    mcpServersPerScope: row.mcp_servers_per_scope,
    skillStorageBytes: num(row.skill_storage_bytes),
    monthlyBudgetUnits: row.monthly_budget_units,
    budgetAlertPercents: row.budget_alert_percents,
    budgetHardStop: row.budget_hard_stop,
    budgetStopWorkspaces: row.budget_stop_workspaces,
  };
}

/** The tenant's row (all null / off when it has none). */
export async function getTenantQuota(tenantId: string, db: DbClient): Promise<TenantQuotaRow> {
  const rows = await db.$queryRaw<RawRow[]>`SELECT * FROM tenant_quotas WHERE tenant_id = ${tenantId}`;
  return fromRaw(rows[0]);
}

/**
 * Takes the tenant's quota lock inside `tx` (creating the row on first use) and returns its overrides.
 * Held until `tx` ends: whatever the caller counts and writes meanwhile is atomic per tenant.
 */
export async function lockTenantQuota(
  tx: Prisma.TransactionClient,
  tenantId: string,
): Promise<TenantQuotaRow> {
  const locked = () => tx.$queryRaw<RawRow[]>`
    SELECT * FROM tenant_quotas WHERE tenant_id = ${tenantId} FOR UPDATE`;
  // The row exists after a tenant's first admission: one statement then, not an insert before each lock.
  const rows = await locked();
  if (rows[0]) return fromRaw(rows[0]);
  await tx.$executeRaw`
    INSERT INTO tenant_quotas (tenant_id, updated_at) VALUES (${tenantId}, now()) ON CONFLICT DO NOTHING`;
  return fromRaw((await locked())[0]);
}

/** The transaction an admission runs in (the caller's: the write it admits commits with it). */
export type QuotaTx = Prisma.TransactionClient;

export async function workspaceExists(tx: QuotaTx, workspaceId: string): Promise<boolean> {
  return (await tx.workspace.count({ where: { id: workspaceId } })) > 0;
}

/** Workspaces holding a machine (or about to): what `liveWorkspaces` counts. */
const LIVE_STATES = ["PROVISIONING", "READY", "STOPPING"] as const;

export async function countLiveWorkspaces(
  tenantId: string,
  options: { except?: string } = {},
  db: DbClient | Prisma.TransactionClient,
): Promise<number> {
  return db.workspace.count({
    where: {
      tenantId,
      state: { in: [...LIVE_STATES] },
      ...(options.except ? { id: { not: options.except } } : {}),
    },
  });
}

/** Workspace ids the tenant holds (every record but a purged one): what `totalWorkspaces` counts. */
export async function countTotalWorkspaces(
  tenantId: string,
  db: DbClient | Prisma.TransactionClient,
): Promise<number> {
  return db.workspace.count({ where: { tenantId, state: { not: "PURGED" } } });
}

const big = (value: number | null | undefined) =>
  value === undefined ? undefined : value === null ? null : BigInt(value);

export async function saveQuotaOverrides(
  tenantId: string,
  overrides: TQuotaOverrides,
  db: DbClient,
): Promise<void> {
  const data = {
    liveWorkspaces: overrides.liveWorkspaces,
    totalWorkspaces: overrides.totalWorkspaces,
    concurrentTurns: overrides.concurrentTurns,
    provisionsPerMinute: overrides.provisionsPerMinute,
    warmClaimsPerMinute: overrides.warmClaimsPerMinute,
    workspaceCpus: overrides.workspaceCpus,
    workspaceMemoryBytes: big(overrides.workspaceMemoryBytes),
    workspaceDiskBytes: big(overrides.workspaceDiskBytes),
    mcpServersPerScope: overrides.mcpServersPerScope,
    skillStorageBytes: big(overrides.skillStorageBytes),
  };
  await db.tenantQuota.upsert({ where: { tenantId }, create: { tenantId, ...data }, update: data });
}

export async function saveBudgetSettings(
  tenantId: string,
  budget: TBudgetSettings,
  db: DbClient,
): Promise<void> {
  const data = {
    monthlyBudgetUnits: budget.monthlyBudgetUnits,
    budgetAlertPercents: [...new Set(budget.alertPercents)].sort((a, b) => a - b),
    budgetHardStop: budget.hardStop,
    budgetStopWorkspaces: budget.stopWorkspaces,
  };
  await db.tenantQuota.upsert({ where: { tenantId }, create: { tenantId, ...data }, update: data });
}
