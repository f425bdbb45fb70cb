import { Prisma } from "@/generated/prisma/client";
import type { TenantScope } from "@/server/auth/scope";
import { type Db, type DbClient } from "@/server/db";
import { recordPurgeReceipt } from "@/server/modules/audit/audit.data";
import type { PurgeReceiptDTO } from "@/server/modules/audit/audit.types";
import { deleteStoredSkills } from "@/server/modules/quota/skill-storage.data";
import { AppError } from "@/server/shared/errors";
import { announceChange } from "@/server/modules/live/change-feed";
import { lockWorkspace, setState } from "@/server/modules/workspace/workspace-lifecycle.data";

/**
 * The purge's rows. A purge of a big folder runs for minutes and may be interrupted (shutdown, crash) or,
 * if its job lock lapses, picked up by a second worker while the first still runs. So the PURGING row
 * names the one run deleting (`purgeHolder`, a claim that lapses unless renewed), keeps the inventory taken
 * before anything was deleted (a retry writes the same receipt, not one of what was left), and only the
 * holder ends the generation: PURGED, the freed rows and the receipt in one transaction.
 */

type PurgeClaim =
  | { outcome: "already-purged" }
  | {
      outcome: "claimed";
      /** The state the purge started from (PURGING: a run before this one was interrupted). */
      from: string;
      /** The inventory an earlier run stored (null: none yet, this run takes it before deleting). */
      inventory: Prisma.JsonValue | null;
    };

/**
 * Claims the purge of `generation` for `holder`: → PURGING (unless it is already), the claim held for
 * `heldForMs`. A claim another run holds and renewed is refused (UNAVAILABLE: the job retries later); a
 * lapsed one is taken over, and the run carries on where the other stopped.
 */
export async function claimPurge(
  scope: TenantScope,
  workspaceId: string,
  claim: { holder: string; generation: number; heldForMs: number; reason: string; requestedBy: string },
  db: Db,
): Promise<PurgeClaim> {
  let announce: string | null | undefined;
  const claimed = await db.$transaction(async (tx): Promise<PurgeClaim> => {
    const row = await lockWorkspace(tx, scope, workspaceId);
    if (!row) throw new AppError("NOT_FOUND", `workspace ${workspaceId} not found`);
    if (row.generation > claim.generation || row.state === "PURGED") return { outcome: "already-purged" };
    const held = await tx.workspace.findUniqueOrThrow({
      where: { id: workspaceId },
      select: { purgeHolder: true, purgeHeldUntil: true, purgeInventory: true },
    });
    const now = new Date();
    if (
      row.state === "PURGING" &&
      held.purgeHolder !== null &&
      held.purgeHolder !== claim.holder &&
      held.purgeHeldUntil !== null &&
      held.purgeHeldUntil > now
    ) {
      throw new AppError("UNAVAILABLE", `workspace ${workspaceId} is being purged by another run`, {
        details: { workspaceId, heldUntil: held.purgeHeldUntil.toISOString() },
      });
    }
    const resuming = row.state === "PURGING";
    if (!resuming) {
      await setState(tx, scope, workspaceId, row, "PURGING", claim.reason, {
        requestedBy: claim.requestedBy,
      });
      announce = row.metering.userId;
    }
    await tx.workspace.update({
      where: { id: workspaceId },
      data: {
        purgeHolder: claim.holder,
        purgeHeldUntil: new Date(now.getTime() + claim.heldForMs),
        // A new purge lists the generation afresh; a resumed one keeps what the first run listed.
        ...(resuming ? {} : { purgeInventory: Prisma.DbNull }),
      },
    });
    return { outcome: "claimed", from: row.state, inventory: resuming ? held.purgeInventory : null };
  });
  // After the commit, as every state change (change-feed.ts): open pages show PURGING at once.
  if (announce !== undefined)
    announceChange(scope.tenantId, {
      topic: "workspace",
      id: workspaceId,
      state: "PURGING",
      userId: announce,
    });
  return claimed;
}

/** Stores the inventory (before anything is deleted); false when `holder` no longer holds the claim. */
export async function storePurgeInventory(
  workspaceId: string,
  holder: string,
  inventory: Record<string, unknown>,
  db: DbClient,
): Promise<boolean> {
  const { count } = await db.workspace.updateMany({
    where: { id: workspaceId, state: "PURGING", purgeHolder: holder },
    data: { purgeInventory: inventory as Prisma.InputJsonValue },
  });
  return count === 1;
}

/**
 * PURGING → PURGED for the claim's holder, in one transaction with what goes with it: the lease and skill
 * storage rows deleted, the claim and inventory cleared, and the purge receipt (`receipt` builds it from
 * the rows counted here). Null when `holder` lost the claim: the run that holds it writes the receipt.
 */
export async function completePurge(
  scope: TenantScope,
  workspaceId: string,
  change: {
    holder: string;
    reason: string;
    data: Record<string, unknown>;
    receipt: (databaseRows: {
      workspaceLeases: number;
      skillStorage: number;
      checkpoints: number;
      checkpointRestores: number;
    }) => Record<string, unknown>;
  },
  db: Db,
): Promise<PurgeReceiptDTO | null> {
  let announce: string | null | undefined;
  const receipt = await db.$transaction(async (tx) => {
    const row = await lockWorkspace(tx, scope, workspaceId);
    if (!row) throw new AppError("NOT_FOUND", `workspace ${workspaceId} not found`);
    const held = await tx.workspace.findUniqueOrThrow({
      where: { id: workspaceId },
      select: { purgeHolder: true },
    });
    if (row.state !== "PURGING" || held.purgeHolder !== change.holder) return null;
    const { count: workspaceLeases } = await tx.workspaceLease.deleteMany({
      where: { tenantId: scope.tenantId, workspaceId },
    });
    // Its skills' bytes no longer count against the tenant's skill storage.
    const skillStorage = await deleteStoredSkills({ workspaceId }, tx);
    // Its turn checkpoints go with it; the store objects only they reached go in the next checkpoint prune.
    const { count: checkpoints } = await tx.workspaceCheckpoint.deleteMany({
      where: { tenantId: scope.tenantId, workspaceId },
    });
    const { count: checkpointRestores } = await tx.checkpointRestore.deleteMany({
      where: { tenantId: scope.tenantId, workspaceId },
    });
    await setState(tx, scope, workspaceId, row, "PURGED", change.reason, change.data, {
      backendHandle: null,
    });
    announce = row.metering.userId;
    await tx.workspace.update({
      where: { id: workspaceId },
      data: { purgeHolder: null, purgeHeldUntil: null, purgeInventory: Prisma.DbNull, restoringId: null },
    });
    return recordPurgeReceipt(
      scope,
      {
        targetType: "workspace",
        targetId: workspaceId,
        deleted: change.receipt({ workspaceLeases, skillStorage, checkpoints, checkpointRestores }),
      },
      tx,
    );
  });
  if (announce !== undefined)
    announceChange(scope.tenantId, {
      topic: "workspace",
      id: workspaceId,
      state: "PURGED",
      userId: announce,
    });
  return receipt;
}
