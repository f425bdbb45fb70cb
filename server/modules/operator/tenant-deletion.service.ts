import type { z } from "zod";
import type { DriverSet } from "@/server/engine/driver-set";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import type { Logger } from "@/server/logger";
import { appendOperatorAudit } from "@/server/modules/operator/operator.data";
import type { ZTenantDeletePayload } from "@/server/modules/operator/operator.jobs";
import { listTenantWorkspaceIds } from "@/server/modules/operator/tenant-admin.data";
import { deleteTenantRows, findTenantDeletionReceipt } from "@/server/modules/operator/tenant-deletion.data";
import { purgeWorkspace } from "@/server/modules/purge/workspace-purge.service";
import type { Db } from "@/server/db";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";

/**
 * `tenant.delete`: purges every workspace of the tenant on its own backend (the same `purgeWorkspace` the
 * `workspace.purge` job runs: stop, inventory, delete machine and data, purge receipt), then deletes the
 * tenant's turn checkpoints from the store, then its rows, and writes the deletion receipt in one transaction. A retry skips what is purged already;
 * a job for a tenant already gone returns its receipt.
 */
export async function deleteTenant(
  deps: { drivers: DriverSet; checkpoints: CheckpointStore; lifecycle: LifecycleEvents },
  payload: z.output<typeof ZTenantDeletePayload>,
  log: Logger,
  db: Db,
): Promise<{ outcome: "deleted" | "already-deleted"; receiptId: string | null; workspaces: number }> {
  const done = await findTenantDeletionReceipt(payload.tenantId, db);
  if (done) return { outcome: "already-deleted", receiptId: done.id, workspaces: 0 };

  const workspaceIds = await listTenantWorkspaceIds(payload.tenantId, { excludeStates: ["PURGED"] }, db);
  const purged: {
    workspaceId: string;
    outcome: string;
    receiptId: string | null;
    generation: number | null;
  }[] = [];
  for (const workspaceId of workspaceIds) {
    const result = await purgeWorkspace(
      { drivers: deps.drivers, db, lifecycle: deps.lifecycle },
      {
        tenantId: payload.tenantId,
        workspaceId,
        reason: "tenant deleted",
        actor: payload.actor,
      },
    );
    purged.push({
      workspaceId,
      outcome: result.outcome,
      receiptId: result.receiptId ?? null,
      generation: result.generation ?? null,
    });
  }
  log.info({ tenantId: payload.tenantId, workspaces: purged.length }, "tenant workspaces purged");
  // Before the rows: a crash after them would leave a tenant no job names any more, and its objects.
  await deps.checkpoints.dropTenant(payload.tenantId);

  const outcome = await deleteTenantRows(
    {
      tenantId: payload.tenantId,
      actor: payload.actor,
      workspaces: purged,
    },
    db,
  );
  if (!outcome) {
    const receipt = await findTenantDeletionReceipt(payload.tenantId, db);
    return { outcome: "already-deleted", receiptId: receipt?.id ?? null, workspaces: purged.length };
  }
  await appendOperatorAudit(
    {
      actor: { type: "system", id: payload.actor },
      action: "tenant.delete",
      targetType: "tenant",
      targetId: payload.tenantId,
      outcome: "success",
      details: {
        phase: "completed",
        receiptId: outcome.receiptId,
        workspaces: purged.length,
        rows: outcome.rows,
      },
    },
    db,
  );
  return { outcome: "deleted", receiptId: outcome.receiptId, workspaces: purged.length };
}
