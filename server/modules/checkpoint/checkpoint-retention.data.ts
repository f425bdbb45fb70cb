import { type DbClient } from "@/server/db";
import type { RetentionRow } from "./checkpoint-retention";

/**
 * The rows the checkpoint prune reads and deletes (checkpoint-prune.service.ts). Not tenant-scoped by a
 * caller's scope: the prune is the installation's and walks every tenant in turn.
 */

const DELETE_BATCH = 500;

/** Tenants that have any checkpoint, with their retention policy columns. */
export async function listTenantsWithCheckpoints(db: DbClient) {
  return db.tenant.findMany({
    where: { checkpoints: { some: {} } },
    select: {
      id: true,
      checkpointKeepTurns: true,
      checkpointKeepDays: true,
      checkpointStorageBytes: true,
    },
    orderBy: { id: "asc" },
  });
}

export async function listRetentionRows(tenantId: string, db: DbClient): Promise<RetentionRow[]> {
  return db.workspaceCheckpoint.findMany({
    where: { tenantId },
    select: { id: true, workspaceId: true, status: true, rootTree: true, baseTree: true, createdAt: true },
  });
}

/**
 * Checkpoints a restore still needs: one being written (RUNNING), and each workspace's latest DONE
 * restore's (the next turn's checkpoint reuses the objects of the files it has not changed since).
 */
export async function checkpointsHeldByRestores(tenantId: string, db: DbClient): Promise<Set<string>> {
  const rows = await db.$queryRaw<{ checkpoint_id: string }[]>`
    SELECT checkpoint_id FROM checkpoint_restores WHERE tenant_id = ${tenantId} AND status = 'RUNNING'
    UNION
    (SELECT DISTINCT ON (workspace_id) checkpoint_id FROM checkpoint_restores
      WHERE tenant_id = ${tenantId} AND status = 'DONE'
      ORDER BY workspace_id, finished_at DESC)`;
  return new Set(rows.map((row) => row.checkpoint_id));
}

/** Deletes checkpoint rows in bounded batches (the store's objects go in the prune's next step). */
export async function deleteCheckpoints(
  tenantId: string,
  ids: readonly string[],
  db: DbClient,
): Promise<number> {
  let deleted = 0;
  for (let start = 0; start < ids.length; start += DELETE_BATCH) {
    const { count } = await db.workspaceCheckpoint.deleteMany({
      where: { tenantId, id: { in: ids.slice(start, start + DELETE_BATCH) } },
    });
    deleted += count;
  }
  return deleted;
}
