import type { CheckpointRestoreKind, Prisma } from "@/generated/prisma/client";
import type { TenantScope } from "@/server/auth/scope";
import { type DbClient } from "@/server/db";
import { AppError } from "@/server/shared/errors";
import { lockWorkspace } from "@/server/modules/workspace/workspace-lifecycle.data";

/**
 * Turn checkpoints and their restores in Postgres. The files are in the checkpoint store
 * (server/workspace/checkpoints/); a row names its root tree there. A restore marks the workspace row
 * (`restoring_id`) in the same transaction that checks it is unused, so no lease but the restore's own
 * can be taken until it ends (workspace-lifecycle.data.ts refuses them).
 */

const checkpointSelect = {
  id: true,
  workspaceId: true,
  generation: true,
  sessionId: true,
  turnId: true,
  kind: true,
  status: true,
  rootTree: true,
  baseTree: true,
  files: true,
  totalBytes: true,
  storedBytes: true,
  added: true,
  changed: true,
  removed: true,
  durationMs: true,
  error: true,
  createdAt: true,
} satisfies Prisma.WorkspaceCheckpointSelect;

export type CheckpointRow = Prisma.WorkspaceCheckpointGetPayload<{ select: typeof checkpointSelect }>;

/**
 * The tree a workspace's next checkpoint compares with: its newest READY checkpoint's, unless a revert
 * or fork wrote another one into it since (then the work folder started from that checkpoint's).
 */
export async function latestCheckpointTree(
  scope: TenantScope,
  workspaceId: string,
  generation: number,
  db: DbClient,
): Promise<string | null> {
  const [checkpoint, restore] = await Promise.all([
    db.workspaceCheckpoint.findFirst({
      where: { tenantId: scope.tenantId, workspaceId, generation, status: "READY" },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      select: { rootTree: true, createdAt: true },
    }),
    db.checkpointRestore.findFirst({
      where: { tenantId: scope.tenantId, workspaceId, status: "DONE" },
      orderBy: [{ finishedAt: "desc" }, { id: "desc" }],
      select: { checkpointId: true, finishedAt: true },
    }),
  ]);
  if (restore?.finishedAt && (!checkpoint || restore.finishedAt > checkpoint.createdAt)) {
    const restored = await db.workspaceCheckpoint.findFirst({
      where: { tenantId: scope.tenantId, id: restore.checkpointId, status: "READY" },
      select: { rootTree: true },
    });
    if (restored?.rootTree) return restored.rootTree;
  }
  return checkpoint?.rootTree ?? null;
}

/** The root trees of a workspace generation's READY turn checkpoints, newest first. */
export async function recentTurnTrees(
  scope: TenantScope,
  workspaceId: string,
  generation: number,
  take: number,
  db: DbClient,
): Promise<string[]> {
  const rows = await db.workspaceCheckpoint.findMany({
    where: { tenantId: scope.tenantId, workspaceId, generation, status: "READY", kind: "TURN" },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    select: { rootTree: true },
    take,
  });
  return rows.flatMap((row) => (row.rootTree ? [row.rootTree] : []));
}

export async function insertCheckpoint(
  scope: TenantScope,
  data: Omit<Prisma.WorkspaceCheckpointUncheckedCreateInput, "tenantId" | "id" | "createdAt">,
  db: DbClient,
): Promise<CheckpointRow> {
  return db.workspaceCheckpoint.create({
    data: { ...data, tenantId: scope.tenantId },
    select: checkpointSelect,
  });
}

export async function getCheckpoint(
  scope: TenantScope,
  checkpointId: string,
  db: DbClient,
): Promise<CheckpointRow> {
  const row = await db.workspaceCheckpoint.findFirst({
    where: { tenantId: scope.tenantId, id: checkpointId },
    select: checkpointSelect,
  });
  if (!row)
    throw new AppError("NOT_FOUND", `checkpoint ${checkpointId} not found`, {
      userMessage: "Checkpoint not found.",
    });
  return row;
}

/** A session's checkpoints, oldest first, with their turns (what the dashboard lays beside the messages). */
export async function listSessionCheckpoints(scope: TenantScope, sessionId: string, db: DbClient) {
  const [checkpoints, turns] = await Promise.all([
    db.workspaceCheckpoint.findMany({
      where: { tenantId: scope.tenantId, sessionId },
      orderBy: [{ createdAt: "asc" }, { id: "asc" }],
      select: checkpointSelect,
      take: 1_000,
    }),
    db.chatTurn.findMany({
      where: { tenantId: scope.tenantId, sessionId },
      select: { id: true, status: true, startedAt: true, revertedAt: true, userMessage: true },
      orderBy: [{ startedAt: "asc" }],
      take: 1_000,
    }),
  ]);
  const turnById = new Map(turns.map((turn) => [turn.id, turn]));
  return checkpoints.map((checkpoint) => ({
    checkpoint,
    turn: checkpoint.turnId ? (turnById.get(checkpoint.turnId) ?? null) : null,
  }));
}

/**
 * Starts a restore of `workspaceId` from a checkpoint: refused (CONFLICT) while the workspace has a
 * lease (a turn, a terminal, a file transfer) or another restore. One wins between two concurrent ones:
 * both lock the workspace row.
 */
export async function beginRestore(
  scope: TenantScope,
  input: {
    kind: CheckpointRestoreKind;
    checkpointId: string;
    workspaceId: string;
    sessionId: string;
  },
  /**
   * Writes that land with it or not at all (a fork's workspace binding, session and transcript); what
   * it returns completes the restore's row (the fork's session id).
   */
  within: ((tx: Prisma.TransactionClient) => Promise<{ sessionId: string }>) | undefined,
  db: DbClient,
): Promise<{ restoreId: string }> {
  return db.$transaction(async (tx) => {
    const completed = within ? await within(tx) : {};
    const locked = await lockWorkspace(tx, scope, input.workspaceId, "update");
    if (!locked) throw new AppError("NOT_FOUND", `workspace ${input.workspaceId} not found`);
    const busy = await tx.$queryRaw<{ restoring_id: string | null; leases: bigint }[]>`
      SELECT w.restoring_id,
        (SELECT count(*) FROM workspace_leases l WHERE l.workspace_id = w.id AND l.expires_at > now()) AS leases
      FROM workspaces w WHERE w.id = ${input.workspaceId}`;
    const state = busy[0];
    if (state?.restoring_id) {
      throw new AppError("CONFLICT", `workspace ${input.workspaceId} is being restored`, {
        userMessage: "Another revert of this workspace is running.",
        details: { restoreId: state.restoring_id },
      });
    }
    const activeLeases = Number(state?.leases ?? 0);
    if (activeLeases > 0) {
      throw new AppError("CONFLICT", `workspace ${input.workspaceId} is in use`, {
        userMessage: "The workspace is in use (a turn, a terminal or a transfer); try again when it ends.",
        details: { activeLeases },
      });
    }
    const restore = await tx.checkpointRestore.create({
      data: { ...input, ...completed, tenantId: scope.tenantId, requestedBy: scope.userId ?? null },
      select: { id: true },
    });
    await tx.workspace.update({ where: { id: input.workspaceId }, data: { restoringId: restore.id } });
    return { restoreId: restore.id };
  });
}

const restoreSelect = {
  id: true,
  kind: true,
  checkpointId: true,
  safetyCheckpointId: true,
  workspaceId: true,
  sessionId: true,
  status: true,
  written: true,
  toWrite: true,
  writtenBytes: true,
  toWriteBytes: true,
  deleted: true,
  error: true,
  createdAt: true,
  finishedAt: true,
} satisfies Prisma.CheckpointRestoreSelect;

export type RestoreRow = Prisma.CheckpointRestoreGetPayload<{ select: typeof restoreSelect }>;

export async function getRestore(scope: TenantScope, restoreId: string, db: DbClient): Promise<RestoreRow> {
  const row = await db.checkpointRestore.findFirst({
    where: { tenantId: scope.tenantId, id: restoreId },
    select: restoreSelect,
  });
  if (!row)
    throw new AppError("NOT_FOUND", `restore ${restoreId} not found`, { userMessage: "Restore not found." });
  return row;
}

/** A RUNNING restore's progress (the workers write it at most about once a second). */
export async function recordRestoreProgress(
  scope: TenantScope,
  restoreId: string,
  progress: { written: number; toWrite: number; writtenBytes: number; toWriteBytes: number },
  db: DbClient,
): Promise<void> {
  await db.checkpointRestore.updateMany({
    where: { tenantId: scope.tenantId, id: restoreId, status: "RUNNING" },
    data: {
      written: progress.written,
      toWrite: progress.toWrite,
      writtenBytes: BigInt(progress.writtenBytes),
      toWriteBytes: BigInt(progress.toWriteBytes),
    },
  });
}

/**
 * Ends a RUNNING restore (a no-op on one that ended: a retried job). A revert that is DONE marks the
 * session's turns after the checkpoint's as reverted, in the same transaction that frees the workspace.
 */
export async function finishRestore(
  scope: TenantScope,
  restoreId: string,
  outcome: { status: "DONE"; written: number; deleted: number } | { status: "FAILED"; error: string },
  db: DbClient,
): Promise<boolean> {
  return db.$transaction(async (tx) => {
    const { count } = await tx.checkpointRestore.updateMany({
      where: { tenantId: scope.tenantId, id: restoreId, status: "RUNNING" },
      data: { ...outcome, finishedAt: new Date() },
    });
    if (count === 0) return false;
    const restore = await tx.checkpointRestore.findUniqueOrThrow({
      where: { id: restoreId },
      select: restoreSelect,
    });
    await tx.workspace.updateMany({
      where: { id: restore.workspaceId, restoringId: restoreId },
      data: { restoringId: null },
    });
    if (outcome.status === "DONE" && restore.kind === "REVERT") {
      const checkpoint = await tx.workspaceCheckpoint.findUniqueOrThrow({
        where: { id: restore.checkpointId },
        select: { turnId: true, createdAt: true, kind: true },
      });
      if (checkpoint.kind === "BEFORE_REVERT") {
        // Undoing a revert: the turns it marked are the session's again.
        const undone = await tx.checkpointRestore.findFirst({
          where: { tenantId: scope.tenantId, safetyCheckpointId: restore.checkpointId },
          select: { id: true },
        });
        if (undone)
          await tx.chatTurn.updateMany({
            where: { tenantId: scope.tenantId, sessionId: restore.sessionId, revertedBy: undone.id },
            data: { revertedAt: null, revertedBy: null },
          });
      }
      const turn = checkpoint.turnId
        ? await tx.chatTurn.findUnique({ where: { id: checkpoint.turnId }, select: { startedAt: true } })
        : null;
      await tx.chatTurn.updateMany({
        where: {
          tenantId: scope.tenantId,
          sessionId: restore.sessionId,
          startedAt: { gt: turn?.startedAt ?? checkpoint.createdAt },
          revertedAt: null,
        },
        data: { revertedAt: new Date(), revertedBy: restoreId },
      });
    }
    return true;
  });
}

/**
 * Records a revert's BEFORE_REVERT checkpoint (what the folder held before the first file is written),
 * once: a retried restore finds it recorded and does not take the half-restored folder for it.
 */
export async function recordSafetyCheckpoint(
  scope: TenantScope,
  restoreId: string,
  data: Omit<Prisma.WorkspaceCheckpointUncheckedCreateInput, "tenantId" | "id" | "createdAt" | "kind">,
  db: DbClient,
): Promise<string> {
  return db.$transaction(async (tx) => {
    const restore = await tx.checkpointRestore.findFirstOrThrow({
      where: { tenantId: scope.tenantId, id: restoreId },
      select: { safetyCheckpointId: true },
    });
    if (restore.safetyCheckpointId) return restore.safetyCheckpointId;
    const checkpoint = await tx.workspaceCheckpoint.create({
      data: { ...data, kind: "BEFORE_REVERT", tenantId: scope.tenantId },
      select: { id: true },
    });
    await tx.checkpointRestore.update({
      where: { id: restoreId },
      data: { safetyCheckpointId: checkpoint.id },
    });
    return checkpoint.id;
  });
}

/** The MCP servers the newest READY checkpoint of a workspace generation recorded as running. */
export async function lastRunningMcps(
  scope: TenantScope,
  workspaceId: string,
  generation: number,
  db: DbClient,
): Promise<string[]> {
  const row = await db.workspaceCheckpoint.findFirst({
    where: { tenantId: scope.tenantId, workspaceId, generation, status: "READY" },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    select: { mcpRunning: true },
  });
  return row?.mcpRunning ?? [];
}
