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
import { claimIdleMachine, deleteWarmMachine, recordPoolUse } from "./warm-pool.data";

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
  | { served: false; reason: "no-pool" | "not-first-use" | "empty" | "bind-failed" };

/**
 * The machine of a first use from the driver's pool: claims the oldest idle machine (one SQL statement,
 * SKIP LOCKED, so concurrent provisions in any worker each get their own) and binds it to `spec`. Anything
 * short of a bound machine answers `served: false` and the caller creates one the usual way at once: a
 * machine that could not be bound is discarded, never offered again. `firstUse`: the workspace has no
 * machine and no data (a first provision, or the generation after a purge); any other provision keeps its
 * own machine.
 */
async function takeFromPool(
  deps: WarmPoolDeps,
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
  const claimed = await claimIdleMachine(driver.kind, poolKey, spec.workspaceId, deps.db);
  if (!claimed) {
    await recordUse(false);
    return { served: false, reason: "empty" };
  }
  let handle: BackendHandle;
  try {
    handle = await pooling.bindIdleMachine(claimed.id, claimed.handle, spec);
  } catch (error) {
    await recordUse(false);
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
 * outcome for the stage timings: `warm` (served), `pool_miss` (a pool that could not serve), or none.
 */
export async function machineForProvision(
  deps: WarmPoolDeps,
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
  return outcome.reason === "empty" || outcome.reason === "bind-failed" ? "pool_miss" : null;
}
