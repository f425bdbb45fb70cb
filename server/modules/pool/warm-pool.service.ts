import { randomBytes } from "node:crypto";
import type { Db } from "@/server/db";
import { WARM_POOL_OPERATIONS } from "@/server/workspace/drivers/deferred-operations";
import type { DriverSet } from "@/server/engine/driver-set";
import type { WarmPoolConfig } from "@/server/engine/warm-pool-config";
import type { Logger } from "@/server/logger";
import type {
  BackendHandle,
  CreateOptions,
  WorkspaceDriver,
  WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import {
  admitWarmClaim,
  tenantLimits,
  type QuotaDeps,
  type WarmClaimAdmission,
} from "@/server/modules/quota/quota.service";
import {
  claimIdleMachineAdmitted,
  deleteWarmMachine,
  recordPoolUse,
  type ClaimedWarmMachine,
} from "./warm-pool.data";

/**
 * Warm pools (README.md in this folder): machines made before anyone asked, with no identity, bound to a
 * workspace by its first provision. This file is the claim side, run inside the `workspace.provision`
 * job; warm-pool-refill.service.ts keeps the pools full.
 */
export type WarmPoolDeps = {
  drivers: DriverSet;
  config: WarmPoolConfig;
  db: Db;
};

/** What a claim needs besides the pools: the tenants' `warmClaimsPerMinute`. */
export type WarmClaimDeps = WarmPoolDeps & { quota: QuotaDeps };

/** A driver that keeps pools (`capabilities.warmPool`), with its pool operations present. */
export type PoolingDriver = WorkspaceDriver &
  Required<Pick<WorkspaceDriver, (typeof WARM_POOL_OPERATIONS)[number]>>;

/** The driver as one that keeps pools, or null when it keeps none. */
export function poolingDriver(driver: WorkspaceDriver): PoolingDriver | null {
  const present = WARM_POOL_OPERATIONS.every((name) => typeof driver[name] === "function");
  return driver.capabilities.warmPool && present ? (driver as PoolingDriver) : null;
}

/** A new pool machine's id: its name on the backend too, so short and plain (`[a-z0-9]`). */
export function newWarmMachineId(): string {
  return `m${randomBytes(10).toString("hex")}`;
}

/** What a provision got from the pool: the bound machine's handle, or why it must create one. */
export type PoolOutcome =
  | { served: true; handle: BackendHandle; machineId: string }
  | { served: false; reason: "no-pool" | "not-first-use" | "empty" | "tenant-limit" | "bind-failed" };

/** The claim took a machine the tenant may not have this minute: rolled back, the machine left idle. */
class TenantLimited extends Error {}

/**
 * The oldest idle machine for `spec`'s workspace, counted against its tenant's `warmClaimsPerMinute`:
 * "empty", "tenant-limit", or the machine with its counted claim. The claim and the count share a
 * transaction, the claim first: an empty pool consumes no unit, and a tenant over its limit rolls the claim
 * back, so the machine stays in the pool for other tenants (the count is the window's atomic check-and-add,
 * so concurrent claims never pass the limit together; a count whose transaction then fails is given back).
 */
async function claimForTenant(
  deps: WarmClaimDeps,
  kind: string,
  poolKey: string,
  spec: WorkspaceSpec,
): Promise<"empty" | "tenant-limit" | { machine: ClaimedWarmMachine; counted: WarmClaimAdmission }> {
  const limit = (await tenantLimits(spec.tenantId, deps.quota, deps.db)).warmClaimsPerMinute;
  const held: { counted?: WarmClaimAdmission } = {};
  try {
    const taken = await claimIdleMachineAdmitted(
      kind,
      poolKey,
      spec.workspaceId,
      async () => {
        const counted = await admitWarmClaim(spec.tenantId, limit, deps.quota);
        if (!counted) throw new TenantLimited();
        held.counted = counted;
        return counted;
      },
      deps.db,
    );
    return taken ? { machine: taken.machine, counted: taken.admitted } : "empty";
  } catch (error) {
    if (error instanceof TenantLimited) return "tenant-limit";
    await held.counted?.release();
    throw error;
  }
}

/**
 * The machine of a first use from the driver's pool: claims the oldest idle machine (one SQL statement,
 * SKIP LOCKED, so concurrent provisions in any worker each get their own) and binds it to `spec`. Anything
 * short of a bound machine answers `served: false` and the caller creates one the usual way at once: a
 * machine that could not be bound is discarded, never offered again. `firstUse`: the workspace has no
 * machine and no data (a first provision, or the generation after a purge); any other provision keeps its
 * own machine.
 */
async function takeFromPool(
  deps: WarmClaimDeps,
  driver: WorkspaceDriver,
  spec: WorkspaceSpec,
  firstUse: boolean,
  log: Logger,
): Promise<PoolOutcome> {
  const pooling = poolingDriver(driver);
  if (!pooling || !deps.config.pools[driver.kind]) return { served: false, reason: "no-pool" };
  if (!firstUse) return { served: false, reason: "not-first-use" };
  const poolKey = await pooling.warmPoolKey();
  // Counted once the outcome is known: a claim whose bind fails is a miss, as its provision's path says.
  const recordUse = (hit: boolean) =>
    recordPoolUse(driver.kind, hit, deps.db).catch((error: unknown) =>
      log.warn({ err: error }, "could not record a warm pool use"),
    );
  const taken = await claimForTenant(deps, driver.kind, poolKey, spec);
  // A tenant over its limit is a miss like an empty pool: created cold at once, never refused.
  if (taken === "empty" || taken === "tenant-limit") {
    await recordUse(false);
    return { served: false, reason: taken };
  }
  const { machine: claimed, counted } = taken;
  let handle: BackendHandle;
  try {
    handle = await pooling.bindIdleMachine(claimed.id, claimed.handle, spec);
  } catch (error) {
    await recordUse(false);
    // No machine of the pool became the tenant's: its claim is given back.
    await counted
      .release()
      .catch((releaseError: unknown) => log.warn({ err: releaseError }, "could not give back a warm claim"));
    log.warn(
      { err: error, machine: claimed.id, workspaceId: spec.workspaceId },
      "could not bind a warm machine; creating one instead",
    );
    // Not bound, so nobody's: discarded. Should that fail, its CLAIMED row stays and the refill retries.
    await pooling
      .discardIdleMachine(claimed.id, claimed.handle)
      .then(() => deleteWarmMachine(claimed.id, deps.db))
      .catch((discardError: unknown) =>
        log.warn({ err: discardError, machine: claimed.id }, "could not discard an unbindable warm machine"),
      );
    return { served: false, reason: "bind-failed" };
  }
  await recordUse(true);
  // The machine is the workspace's now; a row left behind (the database blinked) is removed by the refill,
  // whose discard the driver refuses for a bound machine.
  await deleteWarmMachine(claimed.id, deps.db).catch((error: unknown) =>
    log.warn({ err: error, machine: claimed.id }, "could not delete a bound warm machine's row"),
  );
  return { served: true, handle, machineId: claimed.id };
}

/**
 * The machine a provision gets: a warm one when the driver keeps a pool and this is a first use, else one
 * `create` makes (at once on a miss: an empty pool never makes a provision wait). `pathOf` names the
 * outcome for the stage timings: `warm` (served), `pool_miss` (a pool that could not serve: empty, the
 * tenant's `warmClaimsPerMinute` reached, or a bind that failed), or none.
 */
export async function machineForProvision(
  deps: WarmClaimDeps,
  driver: WorkspaceDriver,
  spec: WorkspaceSpec,
  options: { firstUse: boolean; onProgress: CreateOptions["onProgress"]; log: Logger },
): Promise<{ handle: BackendHandle; pooled: PoolOutcome }> {
  const pooled = await takeFromPool(deps, driver, spec, options.firstUse, options.log);
  if (pooled.served) {
    options.onProgress?.({ step: "pool.bound", detail: pooled.machineId });
    return { handle: pooled.handle, pooled };
  }
  const handle = await driver.create(spec, options.onProgress ? { onProgress: options.onProgress } : {});
  return { handle, pooled };
}

/** The stage-timing path of a provision's pool outcome (null: no pool was involved). */
export function poolPathOf(outcome: PoolOutcome): "warm" | "pool_miss" | null {
  if (outcome.served) return "warm";
  const missed = ["empty", "tenant-limit", "bind-failed"].includes(outcome.reason);
  return missed ? "pool_miss" : null;
}
