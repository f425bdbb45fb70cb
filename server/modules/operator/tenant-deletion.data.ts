import { z } from "zod";
import type { Prisma } from "@/generated/prisma/client";
import type { DbClient } from "@/server/db";

/**
 * The last step of deleting a tenant, after its workspaces were purged: count what it owns in every table,
 * delete the tenant (its rows go by `ON DELETE CASCADE`), the accounts that belonged to it alone, and write
 * the receipt, in one transaction. Tables are found by their `tenant_id` column, so a table added later is
 * counted (and checked by the deletion test) without an edit here.
 */

const RECEIPTS_TABLE = "tenant_deletion_receipts";
const OPERATOR_TABLES = new Set([RECEIPTS_TABLE, "operator_audit_logs"]);

/** Every table of the schema with a `tenant_id` column, except the operator-level ones that outlive tenants. */
export async function tenantOwnedTables(db: DbClient): Promise<string[]> {
  const rows = await db.$queryRaw<{ table_name: string }[]>`
    SELECT c.table_name::text AS table_name FROM information_schema.columns c
      JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
     WHERE c.table_schema = current_schema() AND c.column_name = 'tenant_id' AND t.table_type = 'BASE TABLE'
     ORDER BY 1`;
  return rows.map((row) => row.table_name).filter((name) => !OPERATOR_TABLES.has(name));
}

const ZIdentifier = z.string().regex(/^[a-z_][a-z0-9_]*$/);

/** Rows per table that name the tenant (only tables with any). */
export async function countTenantRows(tenantId: string, db: DbClient): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of await tenantOwnedTables(db)) {
    // The name comes from the catalog, never from input; checked anyway before it is quoted into SQL.
    const name = ZIdentifier.parse(table);
    const rows = await db.$queryRawUnsafe<{ n: bigint }[]>(
      `SELECT count(*) AS n FROM "${name}" WHERE tenant_id = $1`,
      tenantId,
    );
    const n = Number(rows[0]?.n ?? 0);
    if (n > 0) counts[name] = n;
  }
  return counts;
}

export type TenantDeletionOutcome = {
  receiptId: string;
  rows: Record<string, number>;
  deletedUsers: number;
};

/**
 * Deletes the tenant (status `deleting`) with its rows and the users who were members of it alone and are
 * not operators, and records the receipt. Null when the tenant is already gone (a retried job).
 */
export async function deleteTenantRows(
  input: {
    tenantId: string;
    actor: string;
    workspaces: Prisma.InputJsonValue;
  },
  db: DbClient,
): Promise<TenantDeletionOutcome | null> {
  return db.$transaction(
    async (tx) => {
      const tenant = await tx.tenant.findFirst({
        where: { id: input.tenantId, status: "deleting" },
        select: { id: true, slug: true, name: true },
      });
      if (!tenant) return null;
      const rows = await countTenantRows(tenant.id, tx);
      const members = await tx.membership.findMany({
        where: { tenantId: tenant.id },
        select: { userId: true },
      });
      const memberIds = members.map((member) => member.userId);
      const [elsewhere, operators] = await Promise.all([
        tx.membership.findMany({
          where: { userId: { in: memberIds }, tenantId: { not: tenant.id } },
          select: { userId: true },
        }),
        tx.operator.findMany({ where: { userId: { in: memberIds } }, select: { userId: true } }),
      ]);
      const keep = new Set([...elsewhere, ...operators].map((row) => row.userId));
      const alone = memberIds.filter((id) => !keep.has(id));
      // The tenant's purge receipts go with it (they cascade): the deletion receipt keeps what they said.
      const purgeReceipts = await tx.purgeReceipt.findMany({
        where: { tenantId: tenant.id },
        select: { id: true, targetType: true, targetId: true, deleted: true, actor: true, at: true },
        orderBy: { at: "asc" },
      });
      await tx.tenant.delete({ where: { id: tenant.id } });
      const { count: deletedUsers } = await tx.user.deleteMany({ where: { id: { in: alone } } });
      // Browser sessions that had the tenant active keep working for the user's other tenants.
      await tx.authSession.updateMany({
        where: { activeTenantId: tenant.id },
        data: { activeTenantId: null },
      });
      const receipt = await tx.tenantDeletionReceipt.create({
        data: {
          tenantId: tenant.id,
          tenantSlug: tenant.slug,
          tenantName: tenant.name,
          actor: input.actor,
          deleted: {
            workspaces: input.workspaces,
            purgeReceipts: purgeReceipts.map((r) => ({
              ...r,
              at: r.at.toISOString(),
            })),
            databaseRows: rows,
            users: deletedUsers,
            deletedAt: new Date().toISOString(),
          },
        },
        select: { id: true },
      });
      return { receiptId: receipt.id, rows, deletedUsers };
    },
    { timeout: 60_000 },
  );
}

export async function findTenantDeletionReceipt(tenantId: string, db: DbClient) {
  return db.tenantDeletionReceipt.findUnique({ where: { tenantId } });
}

export async function listTenantDeletionReceipts(limit: number, db: DbClient) {
  return db.tenantDeletionReceipt.findMany({ orderBy: [{ at: "desc" }, { id: "desc" }], take: limit });
}
