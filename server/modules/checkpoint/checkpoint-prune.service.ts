import type { Db } from "@/server/db";
import type { Logger } from "@/server/logger";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import {
  ReachableObjects,
  retentionPolicyOf,
  splitByPolicy,
  type RetentionRow,
} from "./checkpoint-retention";
import {
  checkpointsHeldByRestores,
  deleteCheckpoints,
  listRetentionRows,
  listTenantsWithCheckpoints,
} from "./checkpoint-retention.data";

/**
 * Objects younger than this are never swept, referenced or not: a turn being checkpointed right now has
 * stored objects that no row names yet (its row is written when the capture ends).
 */
const CHECKPOINT_OBJECT_GRACE_MS = 60 * 60_000;

export type TenantPruneResult = {
  tenantId: string;
  kept: number;
  expired: number;
  /** Deduplicated bytes the kept checkpoints reach in the store. */
  keptBytes: number;
  prunedObjects: number;
  prunedBytes: number;
};

/**
 * `checkpoint.prune`: applies each tenant's retention (checkpoint-retention.ts), deletes the expired rows,
 * then the store objects no kept checkpoint reaches. Rows go before objects, so a crash in between leaves
 * only unreferenced objects, which the next prune deletes.
 */
export async function pruneCheckpoints(
  deps: { store: CheckpointStore; db: Db; now?: () => Date; graceMs?: number },
  log: Logger,
): Promise<{ tenants: TenantPruneResult[] }> {
  const { db } = deps;
  const tenants: TenantPruneResult[] = [];
  for (const tenant of await listTenantsWithCheckpoints(db)) {
    try {
      tenants.push(await pruneTenant(deps, tenant.id, retentionPolicyOf(tenant), db));
    } catch (error) {
      // One tenant's broken store folder must not stop the others' retention.
      log.error({ err: error, tenantId: tenant.id }, "checkpoint prune of a tenant failed");
    }
  }
  const expired = tenants.reduce((sum, tenant) => sum + tenant.expired, 0);
  log.info({ tenants: tenants.length, expired }, "checkpoint prune done");
  return { tenants };
}

async function pruneTenant(
  deps: { store: CheckpointStore; now?: () => Date; graceMs?: number },
  tenantId: string,
  policy: ReturnType<typeof retentionPolicyOf>,
  db: Db,
): Promise<TenantPruneResult> {
  const rows = await listRetentionRows(tenantId, db);
  const held = await checkpointsHeldByRestores(tenantId, db);
  const { pinned, kept, expired } = splitByPolicy(rows, policy, deps.now?.() ?? new Date(), held);
  const reachable = new ReachableObjects(deps.store, tenantId);
  for (const row of pinned) await reachable.reach(row);
  // Newest first: once one does not fit under the cap, neither does any older one.
  let full = false;
  const survivors: RetentionRow[] = [...pinned];
  for (const row of kept) {
    const fits =
      !full &&
      (await reachable.reach(
        row,
        (added) => policy.storageBytes === null || reachable.totalBytes + added <= policy.storageBytes,
      ));
    if (fits) survivors.push(row);
    else {
      full = true;
      expired.push(row);
    }
  }
  await deleteCheckpoints(
    tenantId,
    expired.map((row) => row.id),
    db,
  );
  const swept = await deps.store.prune(
    tenantId,
    new Set(reachable.objects.keys()),
    deps.graceMs ?? CHECKPOINT_OBJECT_GRACE_MS,
  );
  return {
    tenantId,
    kept: survivors.length,
    expired: expired.length,
    keptBytes: reachable.totalBytes,
    prunedObjects: swept.objects,
    prunedBytes: swept.bytes,
  };
}
