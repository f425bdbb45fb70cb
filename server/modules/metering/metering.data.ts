import type { Prisma } from "@/generated/prisma/client";
import { type DbClient } from "@/server/db";
import type { TUsageEntry, UsageSums } from "./metering.types";

/** The metering ledger (UsageRecord) and the budget alerts: the only Prisma importer of the module. */

/** Inserts entries, skipping ids already stored (a retried flush); returns the rows inserted. */
export async function insertUsageRecords(entries: TUsageEntry[], db: DbClient): Promise<number> {
  if (entries.length === 0) return 0;
  const { count } = await db.usageRecord.createMany({ data: entries, skipDuplicates: true });
  return count;
}

/** Writes one entry inside the caller's transaction (workspace-seconds accrue atomically with a transition). */
export async function insertUsageRecordInTx(tx: Prisma.TransactionClient, entry: TUsageEntry): Promise<void> {
  await tx.usageRecord.create({ data: entry, select: { id: true } });
}

export async function sumUsageSince(
  tenantId: string,
  since: Date,
  filter: { sessionId?: string; agentId?: string } = {},
  db: DbClient,
): Promise<UsageSums> {
  const rows = await db.usageRecord.groupBy({
    by: ["kind", "backend"],
    where: { tenantId, at: { gte: since }, ...filter },
    _sum: { quantity: true },
  });
  return rows.map((row) => ({
    kind: row.kind,
    backend: row.backend,
    quantity: row._sum.quantity ?? 0,
  }));
}

/** Records that `percent` of the month's budget was crossed; false when it already was (fires once). */
export async function claimBudgetAlert(
  alert: { tenantId: string; month: string; percent: number; spentUnits: number; budgetUnits: number },
  db: DbClient,
): Promise<boolean> {
  const { count } = await db.budgetAlert.createMany({ data: [alert], skipDuplicates: true });
  return count === 1;
}

/** The tenant's READY workspaces (a budget stop stops them). */
export async function listReadyWorkspaceIds(tenantId: string, db: DbClient): Promise<string[]> {
  const rows = await db.workspace.findMany({ where: { tenantId, state: "READY" }, select: { id: true } });
  return rows.map((row) => row.id);
}
