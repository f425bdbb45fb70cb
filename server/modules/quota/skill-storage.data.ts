import type { Prisma } from "@/generated/prisma/client";
import { type DbClient, getDb } from "@/server/db";

/**
 * The `skill_storage` ledger: one row per uploaded skill (workspace, partition, folder) with the bytes it
 * stores. Their sum per tenant is what `skillStorageBytes` caps.
 */

export type StoredSkillKey = { workspaceId: string; partition: string; dir: string };

export async function sumStoredSkillBytes(
  tenantId: string,
  db: DbClient | Prisma.TransactionClient = getDb(),
): Promise<number> {
  const result = await db.skillStorageEntry.aggregate({ where: { tenantId }, _sum: { bytes: true } });
  return Number(result._sum.bytes ?? 0n);
}

export async function insertStoredSkill(
  tx: Prisma.TransactionClient,
  tenantId: string,
  key: StoredSkillKey,
  bytes: number,
): Promise<void> {
  await tx.skillStorageEntry.upsert({
    where: { workspaceId_partition_dir: key },
    create: { tenantId, ...key, bytes: BigInt(bytes) },
    update: { bytes: BigInt(bytes) },
  });
}

/** Removes the rows of one skill, of a partition (no `dir`) or of a whole workspace (neither). */
export async function deleteStoredSkills(
  key: { workspaceId: string; partition?: string; dir?: string },
  db: DbClient = getDb(),
): Promise<number> {
  const { count } = await db.skillStorageEntry.deleteMany({ where: key });
  return count;
}
