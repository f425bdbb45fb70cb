import type { Db } from "@/server/db";
import { releaseWorkspaceClaim, renewWorkspaceClaim } from "@/server/modules/workspace/workspace-claim.data";
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import type { DriverSet } from "@/server/engine/driver-set";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import { AppError } from "@/server/shared/errors";
import type { MachineDeletionOptions } from "@/server/workspace/drivers/driver";
import type { ZWorkspacePurgePayload } from "@/server/modules/workspace/workspace.jobs";
import { findWorkspaceRecordForSystem } from "@/server/modules/workspace/workspace-lifecycle.data";
import { takeInventory } from "./workspace-inventory";
import { claimPurge, completePurge, storePurgeInventory } from "./workspace-purge.data";
import { specOfRecord } from "@/server/modules/workspace/workspace-spec";

/**
 * A purge run's claim on the workspace lapses this long after its last renewal: a run that died (or whose
 * loop stalled) is taken over after it, a live one renews it every CLAIM_RENEW_MS while it deletes.
 */
const CLAIM_MS = 30_000;
const CLAIM_RENEW_MS = 10_000;

/** The receipt's account of what the generation held (workspace-inventory.ts), as stored in the row. */
const ZPurgeInventory = z.object({
  skills: z.array(z.string()),
  mcpDeclarations: z.array(z.string()),
  offloadFiles: z.number().int().min(0),
  dataFiles: z.number().int().min(0),
  inventoryError: z.string().optional(),
});
type PurgeInventory = z.infer<typeof ZPurgeInventory>;

const EMPTY_INVENTORY: PurgeInventory = { skills: [], mcpDeclarations: [], offloadFiles: 0, dataFiles: 0 };

type Driver = ReturnType<DriverSet["forKind"]>;

/** How the job runs this purge: its signal (shutdown, lost lock) and where its progress goes. */
type PurgeRun = {
  signal?: AbortSignal | undefined;
  onProgress?: MachineDeletionOptions["onProgress"];
};

async function inventoryOf(driver: Driver, spec: ReturnType<typeof specOfRecord>): Promise<PurgeInventory> {
  if (!(await driver.exists(spec))) return EMPTY_INVENTORY;
  try {
    const machine = await driver.attach(spec);
    try {
      return await takeInventory(machine);
    } finally {
      await driver.detach(machine);
    }
  } catch (error) {
    return { ...EMPTY_INVENTORY, inventoryError: error instanceof Error ? error.message : String(error) };
  }
}

function lostClaim(workspaceId: string): AppError {
  // Retryable: the retry finds the workspace PURGED (the other run finished) or waits for that run.
  return new AppError("UNAVAILABLE", `another run took over the purge of workspace ${workspaceId}`);
}

/**
 * `workspace.purge`: claims the workspace (→ PURGING, so no use provisions it while its data goes; one run
 * at a time, see workspace-purge.data.ts), lists what it holds once, before anything is deleted, stops
 * it, deletes the machine and its data in yielding batches, then ends the generation (→ PURGED) with the
 * purge receipt in one transaction. Interrupted anywhere (shutdown, crash, a lost claim), the next run
 * carries on where it stopped and writes the receipt of the first inventory: one purge, one receipt. The
 * id stays usable: its next use provisions generation + 1. A payload naming an older generation than the
 * record's was done already.
 */
export async function purgeWorkspace(
  /** `lifecycle`: announces `workspace.purged` (the root's `berth.lifecycle`). */
  deps: { drivers: DriverSet; db: Db; lifecycle: LifecycleEvents },
  payload: z.output<typeof ZWorkspacePurgePayload>,
  run: PurgeRun = {},
): Promise<{ outcome: "purged" | "already-purged"; receiptId?: string; generation?: number }> {
  const { db } = deps;
  const scope = await resolveSystemTenantScope(payload.tenantId, { allowSuspended: true }, db);
  const record = await findWorkspaceRecordForSystem(payload.workspaceId, db);
  if (!record || record.tenantId !== payload.tenantId) {
    throw new AppError(
      "NOT_FOUND",
      `workspace ${payload.workspaceId} not found in tenant ${payload.tenantId}`,
    );
  }
  const requested = payload.generation ?? record.generation;
  if (record.generation > requested || record.state === "PURGED") return { outcome: "already-purged" };
  const holder = randomUUID();
  const claim = await claimPurge(
    scope,
    record.id,
    {
      holder,
      generation: requested,
      heldForMs: CLAIM_MS,
      reason: payload.reason,
      requestedBy: payload.actor,
    },
    db,
  );
  if (claim.outcome === "already-purged") return { outcome: "already-purged" };
  const driver = deps.drivers.forKind(record.backendKind);
  const spec = specOfRecord(record);
  try {
    // Read before the machine stops (a stopped Kubernetes workspace keeps its claim, not its Pod) and
    // before anything is deleted; a resumed run uses the first run's. The receipt's account, never a
    // condition of the purge: an unreadable machine is purged all the same, and the receipt says so.
    let inventory = claim.inventory === null ? null : ZPurgeInventory.parse(claim.inventory);
    if (!inventory) {
      inventory = await inventoryOf(driver, spec);
      if (!(await storePurgeInventory(record.id, holder, inventory, db))) throw lostClaim(record.id);
    }
    // What was running (or may be, after an interrupted purge) stops before its data goes.
    if (["READY", "PROVISIONING", "STOPPING", "PURGING"].includes(claim.from)) await driver.stop(spec);
    let renewedAt = Date.now();
    const resources = await driver.purge(spec, {
      signal: run.signal,
      onProgress: async (progress) => {
        if (Date.now() - renewedAt < CLAIM_RENEW_MS) return;
        renewedAt = Date.now();
        if (!(await renewWorkspaceClaim("purge", record.id, holder, CLAIM_MS, db)))
          throw lostClaim(record.id);
        await run.onProgress?.(progress);
      },
    });
    const finalInventory = inventory;
    const receipt = await completePurge(
      scope,
      record.id,
      {
        holder,
        reason: payload.reason,
        data: {
          resources,
          skills: finalInventory.skills.length,
          mcpDeclarations: finalInventory.mcpDeclarations.length,
          nextUse: `provisions generation ${record.generation + 1}`,
        },
        receipt: (databaseRows) => ({
          reason: payload.reason,
          requestedBy: payload.actor,
          backend: driver.name,
          generation: record.generation,
          resources,
          ...finalInventory,
          databaseRows,
          deletedAt: new Date().toISOString(),
        }),
      },
      db,
    );
    if (!receipt) throw lostClaim(record.id);
    deps.lifecycle.emit(record.tenantId, "workspace.purged", {
      workspaceId: record.id,
      generation: record.generation,
      receiptId: receipt.id,
    });
    return { outcome: "purged", receiptId: receipt.id, generation: record.generation };
  } catch (error) {
    // The next run (after a shutdown, a retry) takes over at once instead of waiting for the claim to lapse.
    await releaseWorkspaceClaim("purge", record.id, holder, db).catch(() => undefined);
    throw error;
  }
}
