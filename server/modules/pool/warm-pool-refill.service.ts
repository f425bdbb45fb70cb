import type { Logger } from "@/server/logger";
import type { WarmPoolSize } from "@/server/engine/warm-pool-config";
import {
  deleteWarmMachine,
  listWarmMachines,
  markMachineIdle,
  peakUsesPerMinute,
  reserveWarmMachines,
  takeIdleForDiscard,
  warmMachineExists,
  type WarmMachineRow,
} from "./warm-pool.data";
import { newWarmMachineId, poolingDriver, type PoolingDriver, type WarmPoolDeps } from "./warm-pool.service";

/** How far back the refill looks for demand: the busiest minute of this window sets the target. */
export const DEMAND_WINDOW_MS = 10 * 60_000;
/** A CREATING row this old belongs to a refill that died (an image build takes minutes, not this). */
const STALE_CREATING_MS = 30 * 60_000;
/** A CLAIMED row this old belongs to a provision that died before binding (a bind takes milliseconds). */
const STALE_CLAIM_MS = 5 * 60_000;

/** What one refill did to one pool (the job's result, for the jobs page). */
export type PoolRefillReport = {
  backend: string;
  target: number;
  idle: number;
  created: number;
  discarded: number;
  failed: number;
};

/** The size a pool aims at: the busiest recent minute of first uses, within [min, max]. */
export function poolTarget(size: WarmPoolSize, peakPerMinute: number): number {
  return Math.min(Math.max(peakPerMinute, size.min), size.max);
}

/**
 * `pool.refill`: every configured pool brought to its target. Per pool: machines of an old key, half-made
 * ones of a dead refill, claims a dead provision never bound, and backend machines without a row are
 * discarded; idle ones beyond the target are discarded one per run (demand that fell is followed slowly,
 * a burst is not); the shortfall is reserved (rows first, under a lock, so two refills never both fill it)
 * and created. A pool whose creates fail stops for this run and says so; the next tick tries again.
 */
export async function refillWarmPools(
  deps: WarmPoolDeps,
  log: Logger,
  signal?: AbortSignal,
): Promise<PoolRefillReport[]> {
  const reports: PoolRefillReport[] = [];
  for (const [kind, size] of Object.entries(deps.config.pools)) {
    const driver = poolingDriver(deps.drivers.forKind(kind));
    if (!driver) continue; // the driver set refuses this at boot (driver-set.ts)
    reports.push(await refillPool(deps, driver, size, log, signal));
  }
  return reports;
}

async function refillPool(
  deps: WarmPoolDeps,
  driver: PoolingDriver,
  size: WarmPoolSize,
  log: Logger,
  signal?: AbortSignal,
): Promise<PoolRefillReport> {
  const { db } = deps;
  const poolKey = await driver.warmPoolKey();
  const rows = await listWarmMachines(driver.kind, db);
  let discarded = await discardLeftovers(driver, poolKey, rows, log, deps);
  const peak = await peakUsesPerMinute(driver.kind, new Date(Date.now() - DEMAND_WINDOW_MS), db);
  const target = poolTarget(size, peak);
  const idle = rows.filter((row) => row.state === "IDLE" && row.poolKey === poolKey);
  // Demand that fell is followed one machine per run; a claim may have taken the oldest meanwhile.
  const oldest = idle[0];
  const shrunk = idle.length > target && oldest && (await takeIdleForDiscard(oldest.id, db)) ? 1 : 0;
  if (oldest && shrunk) await driver.discardIdleMachine(oldest.id, oldest.handle);
  discarded += shrunk;
  const reserved = await reserveWarmMachines(driver.kind, poolKey, target, newWarmMachineId, db);
  let created = 0;
  let failed = 0;
  for (const id of reserved) {
    if (signal?.aborted || failed > 0) {
      // Not made: the rows go, so the next run reserves them again.
      await deleteWarmMachine(id, db);
      continue;
    }
    try {
      const handle = await driver.createIdleMachine(id);
      await markMachineIdle(id, handle, db);
      created += 1;
    } catch (error) {
      failed += 1;
      log.warn({ err: error, backend: driver.kind, machine: id }, "could not create a warm machine");
      await driver.discardIdleMachine(id, null).catch(() => {});
      await deleteWarmMachine(id, db);
    }
  }
  return {
    backend: driver.kind,
    target,
    idle: idle.length - shrunk + created,
    created,
    discarded,
    failed,
  };
}

/**
 * Discards what no claim may take any more: idle machines of another key, half-made ones and unbound
 * claims of dead runs, and the driver's pool machines that have no row (a refill died between making one
 * and recording it, or the rows were lost). Returns how many it discarded.
 */
async function discardLeftovers(
  driver: PoolingDriver,
  poolKey: string,
  rows: readonly WarmMachineRow[],
  log: Logger,
  deps: WarmPoolDeps,
): Promise<number> {
  const { db } = deps;
  const now = Date.now();
  let discarded = 0;
  const discard = async (id: string, handle: WarmMachineRow["handle"]) => {
    try {
      // A bound machine is refused by the driver (it is a workspace's): only the row goes then.
      await driver.discardIdleMachine(id, handle);
      await deleteWarmMachine(id, db);
      discarded += 1;
    } catch (error) {
      log.warn({ err: error, backend: driver.kind, machine: id }, "could not discard a warm machine");
    }
  };
  for (const row of rows) {
    const stale =
      (row.state === "IDLE" && row.poolKey !== poolKey) ||
      (row.state === "CREATING" && now - row.createdAt.getTime() > STALE_CREATING_MS) ||
      (row.state === "CLAIMED" && now - (row.claimedAt ?? row.createdAt).getTime() > STALE_CLAIM_MS);
    if (!stale) continue;
    if (row.state === "IDLE" && !(await takeIdleForDiscard(row.id, db))) continue;
    await discard(row.id, row.handle);
  }
  const known = new Set(rows.map((row) => row.id));
  for (const id of await driver.listIdleMachines()) {
    // Rows are written before their machine is made, so a machine without one is nobody's. The listing is
    // read after the rows: a machine reserved since then is not in `known`, so it is checked afresh.
    if (known.has(id) || (await warmMachineExists(id, db))) continue;
    await discard(id, null);
  }
  return discarded;
}
