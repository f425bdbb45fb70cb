import { getDb, type DbClient } from "@/server/db";
import type { Prisma } from "@/generated/prisma/client";
import type { TBufferedAuditEntry } from "./audit-buffer.schema";

/**
 * Inserts buffered audit entries, skipping ids already present (a retried flush) and entries whose
 * tenant is gone (its audit rows were cascaded away; writing them would fail the whole batch forever).
 * Returns the number of rows inserted.
 */
export async function insertBufferedAuditEntries(
  entries: TBufferedAuditEntry[],
  db: DbClient = getDb(),
): Promise<number> {
  const tenantIds = [...new Set(entries.map((entry) => entry.tenantId))];
  const existing = await db.tenant.findMany({ where: { id: { in: tenantIds } }, select: { id: true } });
  const live = new Set(existing.map((tenant) => tenant.id));
  const data = entries
    .filter((entry) => live.has(entry.tenantId))
    .map((entry): Prisma.AuditLogCreateManyInput => ({
      id: entry.id,
      tenantId: entry.tenantId,
      actorType: entry.actorType,
      actorId: entry.actorId ?? null,
      action: entry.action,
      targetType: entry.targetType ?? null,
      targetId: entry.targetId ?? null,
      outcome: entry.outcome,
      ip: entry.ip ?? null,
      userAgent: entry.userAgent ?? null,
      ...(entry.details != null && { details: entry.details as Prisma.InputJsonValue }),
      at: entry.at,
    }));
  if (data.length === 0) return 0;
  const result = await db.auditLog.createMany({ data, skipDuplicates: true });
  return result.count;
}
