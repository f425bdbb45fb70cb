import { admitWorkspaceRecord, type QuotaDeps } from "@/server/modules/quota/quota.service";
import { parseInput } from "@/server/shared/parse-input";
import { Prisma } from "@/generated/prisma/client";
import { type Db, type DbClient, inTransaction, pageSize } from "@/server/db";
import { actorLabel, type TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import { type Page, pageArgs, paginate } from "@/server/shared/page";
import {
  type TUpsertWorkspaceInput,
  type WorkspaceDTO,
  type WorkspaceEventDTO,
  type WorkspaceEventKind,
  type WorkspaceLeaseDTO,
  ZUpsertWorkspaceInput,
} from "@/server/modules/workspace/workspace.types";

/** Leases that hold now (no expiry, or not expired yet). */
export const liveLeases = () => ({ OR: [{ expiresAt: null }, { expiresAt: { gt: new Date() } }] });

export const workspaceSelect = () =>
  ({
    id: true,
    backendKind: true,
    isolationPolicy: true,
    agentId: true,
    userId: true,
    state: true,
    generation: true,
    backendHandle: true,
    lastActivityAt: true,
    stateChangedAt: true,
    error: true,
    label: true,
    createdAt: true,
    updatedAt: true,
    _count: { select: { leases: { where: liveLeases() } } },
  }) satisfies Prisma.WorkspaceSelect;

type WorkspaceRow = Prisma.WorkspaceGetPayload<{ select: ReturnType<typeof workspaceSelect> }>;
export const toWorkspaceDTO = ({ _count, ...row }: WorkspaceRow): WorkspaceDTO => ({
  ...row,
  activeLeases: _count.leases,
});

/**
 * Records the binding of an engine workspace to this tenant (state PENDING, event `created`), or
 * returns the existing binding. A workspace id that belongs to another tenant is a CONFLICT and
 * is never touched.
 */
export async function upsertWorkspaceBinding(
  scope: TenantScope,
  rawInput: TUpsertWorkspaceInput,
  quota: Pick<QuotaDeps, "config">,
  db: DbClient,
): Promise<{ workspace: WorkspaceDTO; created: boolean }> {
  const input = parseInput(ZUpsertWorkspaceInput, rawInput);
  const existing = await getWorkspaceOrNull(scope, input.id, db);
  if (existing) return { workspace: existing, created: false };
  // Joins the caller's transaction when given one (session.create binds in the session's transaction).
  // ON CONFLICT DO NOTHING instead of catching a unique violation: a failed statement would abort it.
  return inTransaction(db, async (tx) => {
    // A new id counts against the tenant's `totalWorkspaces`, admitted under its quota lock.
    await admitWorkspaceRecord(tx, scope.tenantId, input.id, quota);
    const { count } = await tx.workspace.createMany({
      data: [
        {
          id: input.id,
          tenantId: scope.tenantId,
          backendKind: input.backendKind,
          isolationPolicy: input.isolationPolicy,
          agentId: input.agentId ?? null,
          userId: input.userId ?? null,
        },
      ],
      skipDuplicates: true,
    });
    if (count === 1) await insertEvent(tx, scope, input.id, { kind: "created", reason: null, data: null });
    const row = await getWorkspaceOrNull(scope, input.id, tx);
    if (row) return { workspace: row, created: count === 1 };
    throw new AppError("CONFLICT", `workspace id ${input.id} is bound to another tenant`, {
      userMessage: "This workspace id is not available.",
    });
  });
}

export async function getWorkspaceOrNull(
  scope: TenantScope,
  workspaceId: string,
  db: DbClient,
): Promise<WorkspaceDTO | null> {
  const row = await db.workspace.findFirst({
    where: { tenantId: scope.tenantId, id: workspaceId },
    select: workspaceSelect(),
  });
  return row ? toWorkspaceDTO(row) : null;
}

export async function getWorkspace(
  scope: TenantScope,
  workspaceId: string,
  db: DbClient,
): Promise<WorkspaceDTO> {
  const workspace = await getWorkspaceOrNull(scope, workspaceId, db);
  if (!workspace) throw notFound(workspaceId);
  return workspace;
}

/** Names the workspace (null clears it); false when the tenant has no such workspace. */
export async function setWorkspaceLabel(
  scope: TenantScope,
  workspaceId: string,
  label: string | null,
  db: DbClient,
): Promise<boolean> {
  const { count } = await db.workspace.updateMany({
    where: { tenantId: scope.tenantId, id: workspaceId },
    data: { label },
  });
  return count === 1;
}

// ----------------------------------------------------------------------------------------- leases

const leaseSelect = {
  id: true,
  workspaceId: true,
  holder: true,
  reason: true,
  expiresAt: true,
  createdAt: true,
} satisfies Prisma.WorkspaceLeaseSelect;

export async function releaseWorkspaceLease(
  scope: TenantScope,
  workspaceId: string,
  holder: string,
  db: Db,
  options: { quiet?: boolean } = {},
): Promise<boolean> {
  return db.$transaction(async (tx) => {
    const { count } = await tx.workspaceLease.deleteMany({
      where: { tenantId: scope.tenantId, workspaceId, holder },
    });
    if (count > 0 && !options.quiet)
      await insertEvent(tx, scope, workspaceId, { kind: "lease_released", reason: null, data: { holder } });
    return count > 0;
  });
}

export async function listWorkspaceLeases(
  scope: TenantScope,
  workspaceId: string,
  db: DbClient,
): Promise<WorkspaceLeaseDTO[]> {
  return db.workspaceLease.findMany({
    where: { tenantId: scope.tenantId, workspaceId, ...liveLeases() },
    select: leaseSelect,
    orderBy: { createdAt: "asc" },
  });
}

// ---------------------------------------------------------------------------------------- ledger

const eventSelect = {
  id: true,
  workspaceId: true,
  kind: true,
  reason: true,
  actor: true,
  data: true,
  at: true,
} satisfies Prisma.WorkspaceEventSelect;

/** Appends a ledger entry that is not a state change (transitions write their own). */
export async function appendWorkspaceEvent(
  scope: TenantScope,
  workspaceId: string,
  event: { kind: WorkspaceEventKind; reason?: string | null; data?: Record<string, unknown> | null },
  db: DbClient,
): Promise<WorkspaceEventDTO> {
  const workspace = await db.workspace.findFirst({
    where: { tenantId: scope.tenantId, id: workspaceId },
    select: { id: true },
  });
  if (!workspace) throw notFound(workspaceId);
  return insertEvent(db, scope, workspaceId, {
    kind: event.kind,
    reason: event.reason ?? null,
    data: event.data ?? null,
  });
}

/** Newest first. */
export async function listWorkspaceEvents(
  scope: TenantScope,
  workspaceId: string,
  options: { limit?: number; kinds?: WorkspaceEventKind[] } = {},
  db: DbClient,
): Promise<WorkspaceEventDTO[]> {
  return (await pageWorkspaceEvents(scope, workspaceId, options, db)).items;
}

/** Newest first, one page of `limit` (default 100) after `cursor`, optionally only some kinds. */
export async function pageWorkspaceEvents(
  scope: TenantScope,
  workspaceId: string,
  options: { limit?: number; cursor?: string; kinds?: WorkspaceEventKind[] } = {},
  db: DbClient,
): Promise<Page<WorkspaceEventDTO>> {
  const take = pageSize(options.limit, 100);
  const rows = await db.workspaceEvent.findMany({
    where: {
      tenantId: scope.tenantId,
      workspaceId,
      ...(options.kinds && options.kinds.length > 0 ? { kind: { in: options.kinds } } : {}),
    },
    select: eventSelect,
    orderBy: [{ at: "desc" }, { id: "desc" }],
    ...pageArgs(take, options.cursor),
  });
  return paginate(rows, take);
}

async function insertEvent(
  db: DbClient,
  scope: TenantScope,
  workspaceId: string,
  event: { kind: WorkspaceEventKind; reason: string | null; data: Record<string, unknown> | null },
): Promise<WorkspaceEventDTO> {
  return db.workspaceEvent.create({
    data: {
      tenantId: scope.tenantId,
      workspaceId,
      kind: event.kind,
      reason: event.reason,
      actor: actorLabel(scope),
      data: event.data === null ? Prisma.DbNull : (event.data as Prisma.InputJsonValue),
    },
    select: eventSelect,
  });
}

// -------------------------------------------------------------------------------- system queries

/** The owner processes of current leases (what the dead-holder reaper asks the heartbeats about). */
export async function listLeaseOwnersForSystem(db: DbClient): Promise<string[]> {
  const rows = await db.workspaceLease.findMany({
    where: { ownerId: { not: null } },
    select: { ownerId: true },
    distinct: ["ownerId"],
    take: 1_000,
  });
  return rows.flatMap((row) => (row.ownerId === null ? [] : [row.ownerId]));
}

/** Releases every lease these (dead) processes held, each with a `lease_released` event saying why. */
export async function releaseLeasesOfOwnersForSystem(
  ownerIds: readonly string[],
  reason: string,
  db: Db,
): Promise<number> {
  if (ownerIds.length === 0) return 0;
  return db.$transaction(async (tx) => {
    const leases = await tx.workspaceLease.findMany({
      where: { ownerId: { in: [...ownerIds] } },
      select: { id: true, tenantId: true, workspaceId: true, holder: true, ownerId: true },
    });
    if (leases.length === 0) return 0;
    await tx.workspaceLease.deleteMany({ where: { id: { in: leases.map((lease) => lease.id) } } });
    await tx.workspaceEvent.createMany({
      data: leases.map((lease) => ({
        tenantId: lease.tenantId,
        workspaceId: lease.workspaceId,
        kind: "lease_released" as const,
        reason,
        actor: "system:dead-holders",
        data: { holder: lease.holder, ownerId: lease.ownerId },
      })),
    });
    return leases.length;
  });
}

function notFound(workspaceId: string): AppError {
  return new AppError("NOT_FOUND", `workspace ${workspaceId} not found`, {
    userMessage: "Workspace not found.",
  });
}
