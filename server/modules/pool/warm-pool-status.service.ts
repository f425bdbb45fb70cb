import type { Db } from "@/server/db";
import type { DriverSet } from "@/server/engine/driver-set";
import { NO_WARM_POOLS, type WarmPoolConfig } from "@/server/engine/warm-pool-config";
import { readWarmPoolFigures } from "./warm-pool.data";
import { DEMAND_WINDOW_MS, poolTarget } from "./warm-pool-refill.service";
import type { TWarmPoolView } from "./warm-pool.types";

/** Every configured warm pool with its figures now (operators: the console's Warm pools page). */
export async function readWarmPools(
  engine: { drivers: DriverSet; config: { warmPools?: WarmPoolConfig } },
  db: Db,
): Promise<TWarmPoolView[]> {
  const since = new Date(Date.now() - DEMAND_WINDOW_MS);
  const pools = Object.entries((engine.config.warmPools ?? NO_WARM_POOLS).pools);
  return Promise.all(
    pools.map(async ([backend, size]) => {
      const figures = await readWarmPoolFigures(backend, since, db);
      return {
        backend,
        label: engine.drivers.definitionOf(backend)?.label ?? backend,
        min: size.min,
        max: size.max,
        target: poolTarget(size, figures.peakPerMinute),
        idle: figures.machines.IDLE,
        creating: figures.machines.CREATING,
        claimed: figures.machines.CLAIMED,
        hits: figures.hits,
        misses: figures.misses,
        claimP50Ms: figures.claimP50Ms,
        windowMinutes: DEMAND_WINDOW_MS / 60_000,
      };
    }),
  );
}
