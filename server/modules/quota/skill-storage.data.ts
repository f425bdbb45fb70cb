import type { Prisma } from "@/generated/prisma/client";
import { type DbClient, inTransaction } from "@/server/db";
import { lockTenantQuota, type TenantQuotaRow } from "./quota.data";

/**
 * The `skill_storage` ledger: one row per uploaded skill (workspace, partition, folder) with the bytes it
 * stores. Their sum per tenant is what `skillStorageBytes` caps.
 */

export type StoredSkillKey = { workspaceId: string; partition: string; dir: string };

export async function sumStoredSkillBytes(
  tenantId: string,
  db: DbClient | Prisma.TransactionClient,
): Promise<number> {
  const result = await db.skillStorageEntry.aggregate({ where: { tenantId }, _sum: { bytes: true } });
  return Number(result._sum.bytes ?? 0n);
}

/**
 * Under the tenant's quota row lock: counts the tenant's stored bytes and, unless `limitOf(row)` (0: no
 * cap) would be passed, records the skill's. Returns what it counted when it refused.
 */
export async function insertStoredSkillWithin(
  tenantId: string,
  key: StoredSkillKey,
  bytes: number,
  limitOf: (row: TenantQuotaRow) => number,
  db: DbClient,
): Promise<{ admitted: true } | { admitted: false; limit: number; used: number }> {
  return inTransaction(db, async (tx) => {
    const limit = limitOf(await lockTenantQuota(tx, tenantId));
    const used = await sumStoredSkillBytes(tenantId, tx);
    if (limit > 0 && used + bytes > limit) return { admitted: false as const, limit, used };
    await tx.skillStorageEntry.upsert({
      where: { workspaceId_partition_dir: key },
      create: { tenantId, ...key, bytes: BigInt(bytes) },
      update: { bytes: BigInt(bytes) },
    });
    return { admitted: true as const };
  });
}

/** Removes the rows of one skill, of a partition (no `dir`) or of a whole workspace (neither). */
export async function deleteStoredSkills(
  key: { workspaceId: string; partition?: string; dir?: string },
  db: DbClient,
): Promise<number> {
  const { count } = await db.skillStorageEntry.deleteMany({ where: key });
  return count;
}
