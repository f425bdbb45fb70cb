import type { Prisma } from "@/generated/prisma/client";
import { type DbClient, isUniqueViolation } from "@/server/db";
import { sanitizeStrings } from "@/server/shared/unsafe-strings";
import type { OperatorAuditView } from "@/server/modules/operator/operator.types";

/**
 * Operators and the operator audit. Not tenant-scoped: these rows sit above every tenant, and only the
 * operator services (which check that their caller is an operator) call them.
 */

export async function isOperatorUser(userId: string, db: DbClient): Promise<boolean> {
  return (await db.operator.findUnique({ where: { userId }, select: { id: true } })) !== null;
}

export async function listOperators(db: DbClient) {
  const rows = await db.operator.findMany({ orderBy: { createdAt: "asc" } });
  const users = await db.user.findMany({
    where: { id: { in: rows.map((row) => row.userId) } },
    select: { id: true, email: true },
  });
  const emails = new Map(users.map((user) => [user.id, user.email]));
  return rows.map((row) => ({
    userId: row.userId,
    email: emails.get(row.userId) ?? null,
    grantedBy: row.grantedBy,
    createdAt: row.createdAt,
  }));
}

/** Grants the operator role; false when the user already has it. */
export async function insertOperator(userId: string, grantedBy: string, db: DbClient): Promise<boolean> {
  try {
    await db.operator.create({ data: { userId, grantedBy }, select: { id: true } });
    return true;
  } catch (error) {
    if (isUniqueViolation(error)) return false;
    throw error;
  }
}

/**
 * Revokes the role unless it is the last operator's. Serialized on a transaction-level advisory lock, so two
 * operators revoking each other at once cannot leave the installation without one.
 */
export async function deleteOperatorUnlessLast(
  userId: string,
  db: DbClient,
): Promise<"revoked" | "not-operator" | "last"> {
  return db.$transaction(async (tx) => {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext('berth.operators'))`;
    const row = await tx.operator.findUnique({ where: { userId }, select: { id: true } });
    if (!row) return "not-operator";
    if ((await tx.operator.count()) <= 1) return "last";
    await tx.operator.delete({ where: { id: row.id } });
    return "revoked";
  });
}

export async function findUserIdByEmail(email: string, db: DbClient): Promise<string | null> {
  const row = await db.user.findFirst({
    where: { email: { equals: email, mode: "insensitive" } },
    select: { id: true },
  });
  return row?.id ?? null;
}

export type OperatorAuditEntry = {
  actor: { type: "user"; id: string } | { type: "system"; id: string | null };
  action: string;
  targetType: "tenant" | "operator";
  targetId: string;
  targetLabel?: string | null;
  outcome: "success" | "failure";
  details?: Record<string, unknown>;
};

export async function appendOperatorAudit(entry: OperatorAuditEntry, db: DbClient): Promise<void> {
  const clean = sanitizeStrings(entry);
  await db.operatorAuditLog.create({
    data: {
      actorType: clean.actor.type,
      actorId: clean.actor.id,
      action: clean.action,
      targetType: clean.targetType,
      targetId: clean.targetId,
      targetLabel: clean.targetLabel ?? null,
      outcome: clean.outcome,
      details: (clean.details ?? undefined) as Prisma.InputJsonValue | undefined,
    },
    select: { id: true },
  });
}

/** The newest operator audit rows (optionally for one target), with actor emails. */
export async function listOperatorAudit(
  filter: { targetId?: string; limit: number },
  db: DbClient,
): Promise<OperatorAuditView[]> {
  const rows = await db.operatorAuditLog.findMany({
    where: filter.targetId ? { targetId: filter.targetId } : {},
    orderBy: [{ at: "desc" }, { id: "desc" }],
    take: filter.limit,
  });
  const actorIds = [...new Set(rows.flatMap((row) => (row.actorId ? [row.actorId] : [])))];
  const users = await db.user.findMany({
    where: { id: { in: actorIds } },
    select: { id: true, email: true },
  });
  const emails = new Map(users.map((user) => [user.id, user.email]));
  return rows.map((row) => ({
    ...row,
    actorEmail: row.actorId ? (emails.get(row.actorId) ?? null) : null,
  }));
}
