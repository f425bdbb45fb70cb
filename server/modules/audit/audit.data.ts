import { parseInput } from "@/server/shared/parse-input";
import type { Prisma } from "@/generated/prisma/client";
import { type DbClient, isRejectedData, pageSize } from "@/server/db";
import { isAppError } from "@/server/shared/errors";
import { sanitizeStrings } from "@/server/shared/unsafe-strings";
import { actorLabel, actorOfScope, type TenantScope } from "@/server/auth/scope";
import { type Page, pageArgs, paginate } from "@/server/shared/page";
import { currentRequestMeta } from "@/server/shared/request-meta";
import type { TPurgeTargetType } from "@/server/modules/audit/audit.types";
import {
  type AuditActorType,
  type AuditLogDTO,
  type TAuditFilters,
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
export async function appendAuditLog(scope: TenantScope, entry: TAuditRowInput, db: DbClient): Promise<void> {
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
  db: DbClient,
): Promise<number> {
  if (entries.length === 0) return 0;
  const data = entries.map((entry) => toAuditRow(scope, entry));
  const { count } = await db.auditLog.createMany({ data, skipDuplicates: true });
  return count;
}

/** The `where` of a filtered audit read (list and CSV export read the same rows). */
function auditWhere(scope: TenantScope, filters: TAuditFilters): Prisma.AuditLogWhereInput {
  return {
    tenantId: scope.tenantId,
    ...(filters.action ? { action: filters.action } : {}),
    ...(filters.actorType ? { actorType: filters.actorType } : {}),
    ...(filters.actorId ? { actorId: filters.actorId } : {}),
    ...(filters.targetType ? { targetType: filters.targetType } : {}),
    ...(filters.targetId ? { targetId: filters.targetId } : {}),
    ...(filters.outcome ? { outcome: filters.outcome } : {}),
    ...(filters.from || filters.to
      ? {
          at: {
            ...(filters.from ? { gte: filters.from } : {}),
            ...(filters.to ? { lte: filters.to } : {}),
          },
        }
      : {}),
  };
}

/** Newest first, filtered; `cursor` is the `nextCursor` of the previous page. */
export async function listAuditLogs(
  scope: TenantScope,
  options: TAuditFilters & { limit?: number; cursor?: string } = {},
  db: DbClient,
): Promise<Page<AuditLogDTO>> {
  const take = pageSize(options.limit);
  const rows = await db.auditLog.findMany({
    where: auditWhere(scope, options),
    select: auditSelect,
    orderBy: [{ at: "desc" }, { id: "desc" }],
    ...pageArgs(take, options.cursor),
  });
  return paginate(rows, take);
}

/** What the audit filters can choose from: the actions and actors the tenant's log holds. */
export async function auditFacets(
  scope: TenantScope,
  db: DbClient,
): Promise<{
  actions: string[];
  targetTypes: string[];
  actors: { type: AuditActorType; id: string | null }[];
}> {
  const [actions, targetTypes, actors] = await Promise.all([
    db.auditLog.findMany({
      where: { tenantId: scope.tenantId },
      distinct: ["action"],
      select: { action: true },
      orderBy: { action: "asc" },
      take: 500,
    }),
    db.auditLog.findMany({
      where: { tenantId: scope.tenantId, targetType: { not: null } },
      distinct: ["targetType"],
      select: { targetType: true },
      orderBy: { targetType: "asc" },
      take: 100,
    }),
    db.auditLog.findMany({
      where: { tenantId: scope.tenantId },
      distinct: ["actorType", "actorId"],
      select: { actorType: true, actorId: true },
      take: 500,
    }),
  ]);
  return {
    actions: actions.map((row) => row.action),
    targetTypes: targetTypes.flatMap((row) => (row.targetType ? [row.targetType] : [])),
    actors: actors.map((row) => ({ type: row.actorType, id: row.actorId })),
  };
}

/**
 * Names for actors, keyed `"<type>:<id>"`: a user's email (a user who has left the tenant keeps it), an
 * API key's name (revoked keys too; only the tenant's own keys). Unknown ids are simply absent.
 */
export async function auditActorNames(
  scope: TenantScope,
  actors: { type: string; id: string | null }[],
  db: DbClient,
): Promise<Map<string, string>> {
  const idsOf = (type: string) => [
    ...new Set(actors.filter((actor) => actor.type === type && actor.id).map((actor) => actor.id!)),
  ];
  const userIds = idsOf("user");
  const keyIds = idsOf("api_key");
  const [users, keys] = await Promise.all([
    userIds.length === 0
      ? []
      : db.user.findMany({ where: { id: { in: userIds } }, select: { id: true, email: true } }),
    keyIds.length === 0
      ? []
      : db.apiKey.findMany({
          where: { tenantId: scope.tenantId, id: { in: keyIds } },
          select: { id: true, name: true },
        }),
  ]);
  return new Map([
    ...users.map((user) => [`user:${user.id}`, user.email] as const),
    ...keys.map(
      (key) => [`api_key:${key.id}`, key.name ? `key ${key.name}` : `key ${key.id.slice(0, 8)}`] as const,
    ),
  ]);
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
  db: DbClient,
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
  db: DbClient,
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
