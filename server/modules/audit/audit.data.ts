import { parseInput } from "@/server/shared/parse-input";
import type { Prisma } from "@/generated/prisma/client";
import { type DbClient, getDb, isRejectedData, pageSize } from "@/server/db";
import { isAppError } from "@/server/shared/errors";
import { sanitizeStrings } from "@/server/shared/unsafe-strings";
import { actorLabel, actorOfScope, type TenantScope } from "@/server/auth/scope";
import { type Page, pageArgs, paginate } from "@/server/shared/page";
import { currentRequestMeta } from "@/server/shared/request-meta";
import type { TPurgeTargetType } from "@/server/modules/audit/audit.types";
import {
  type AuditLogDTO,
  type PurgeReceiptDTO,
  type TAuditRowInput,
  ZAuditRowInput,
} from "@/server/modules/audit/audit.types";

const auditSelect = {
  id: true,
  actorType: true,
  actorId: true,
  action: true,
  targetType: true,
  targetId: true,
  outcome: true,
  ip: true,
  userAgent: true,
  details: true,
  at: true,
} satisfies Prisma.AuditLogSelect;

/**
 * True when an audit write failed on the entries themselves (invalid, or refused by the database), so the
 * same write can never succeed and the entries must be set aside; false for outages, which a retry fixes.
 */
export function isRejectedAuditWrite(error: unknown): boolean {
  return isRejectedData(error) || (isAppError(error) && error.code === "BAD_REQUEST");
}

function toAuditRow(scope: TenantScope, raw: TAuditRowInput): Prisma.AuditLogCreateManyInput {
  // What a caller sent (a target id, a user agent) must never make its audit row unstorable.
  const entry = parseInput(ZAuditRowInput, sanitizeStrings(raw));
  const actor = entry.actor ?? actorOfScope(scope);
  return {
    ...(entry.id ? { id: entry.id } : {}),
    tenantId: scope.tenantId,
    actorType: actor.type,
    actorId: actor.id,
    action: entry.action,
    targetType: entry.targetType ?? null,
    targetId: entry.targetId ?? null,
    outcome: entry.outcome,
    ip: entry.ip ?? currentRequestMeta()?.ip ?? null,
    userAgent: entry.userAgent ?? currentRequestMeta()?.userAgent ?? null,
    details: (entry.details ?? undefined) as Prisma.InputJsonValue | undefined,
    ...(entry.at ? { at: entry.at } : {}),
  };
}

/** Appends one audit entry. Pass the transaction client to record it atomically with the change. */
export async function appendAuditLog(
  scope: TenantScope,
  entry: TAuditRowInput,
  db: DbClient = getDb(),
): Promise<void> {
  await db.auditLog.create({ data: toAuditRow(scope, entry), select: { id: true } });
}

/**
 * Appends many entries of one tenant (the audit buffer's flush). Entries whose caller-supplied id is already
 * in the table are skipped, so a flush retried after a partial write never duplicates a row. Returns how
 * many rows were inserted. Throws BAD_REQUEST (writing nothing) when any entry is invalid.
 */
export async function appendAuditLogs(
  scope: TenantScope,
  entries: TAuditRowInput[],
  db: DbClient = getDb(),
): Promise<number> {
  if (entries.length === 0) return 0;
  const data = entries.map((entry) => toAuditRow(scope, entry));
  const { count } = await db.auditLog.createMany({ data, skipDuplicates: true });
  return count;
}

/** Newest first; `cursor` is the `nextCursor` of the previous page. */
export async function listAuditLogs(
  scope: TenantScope,
  options: { limit?: number; cursor?: string; action?: string; targetType?: string; targetId?: string } = {},
  db: DbClient = getDb(),
): Promise<Page<AuditLogDTO>> {
  const take = pageSize(options.limit);
  const rows = await db.auditLog.findMany({
    where: {
      tenantId: scope.tenantId,
      ...(options.action ? { action: options.action } : {}),
      ...(options.targetType ? { targetType: options.targetType } : {}),
      ...(options.targetId ? { targetId: options.targetId } : {}),
    },
    select: auditSelect,
    orderBy: [{ at: "desc" }, { id: "desc" }],
    ...pageArgs(take, options.cursor),
  });
  return paginate(rows, take);
}

// --------------------------------------------------------------------------------- purge receipts

const receiptSelect = {
  id: true,
  targetType: true,
  targetId: true,
  deleted: true,
  actor: true,
  at: true,
} satisfies Prisma.PurgeReceiptSelect;

export async function recordPurgeReceipt(
  scope: TenantScope,
  receipt: { targetType: TPurgeTargetType; targetId: string; deleted: Record<string, unknown> },
  db: DbClient = getDb(),
): Promise<PurgeReceiptDTO> {
  return db.purgeReceipt.create({
    data: {
      tenantId: scope.tenantId,
      targetType: receipt.targetType,
      targetId: receipt.targetId,
      deleted: receipt.deleted as Prisma.InputJsonValue,
      actor: actorLabel(scope),
    },
    select: receiptSelect,
  });
}

export async function listPurgeReceipts(
  scope: TenantScope,
  options: { targetType?: TPurgeTargetType; targetId?: string; limit?: number } = {},
  db: DbClient = getDb(),
): Promise<PurgeReceiptDTO[]> {
  return db.purgeReceipt.findMany({
    where: {
      tenantId: scope.tenantId,
      ...(options.targetType ? { targetType: options.targetType } : {}),
      ...(options.targetId ? { targetId: options.targetId } : {}),
    },
    select: receiptSelect,
    orderBy: [{ at: "desc" }, { id: "desc" }],
    take: pageSize(options.limit),
  });
}
