import type { Berth } from "@/server/composition/berth";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { NO_WARM_POOLS, type WarmPoolConfig } from "@/server/engine/warm-pool-config";
import { refillWarmPools } from "@/server/modules/pool/warm-pool-refill.service";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { BerthSchedulerId } from "@/server/queue/schedulers";
import type { ProcessorRegistry } from "../registry";
import { defineSchedule, type Schedule } from "../schedules";

/** `pool.refill` (transport-thin): every warm pool brought to its target by the record-keeping service. */
export function registerPoolProcessors(
  registry: ProcessorRegistry<BerthJobCatalog>,
  engine: Pick<WorkspaceEngine, "drivers" | "config">,
  berth: Pick<Berth, "db">,
): void {
  registry.registerProcessor("pool.refill", ({ log, signal }) =>
    refillWarmPools(
      { drivers: engine.drivers, config: engine.config.warmPools ?? NO_WARM_POOLS, db: berth.db },
      log,
      signal,
    ),
  );
}

/**
 * The refill's tick, scheduled whether or not pools are configured (health expects every scheduler of
 * BERTH_SCHEDULERS; a run with no pools reads nothing).
 */
export function poolSchedules(config: { warmPools?: WarmPoolConfig }): Schedule<BerthJobCatalog>[] {
  return [
    defineSchedule<BerthJobCatalog, "pool.refill">({
      id: "pool.refill.tick" satisfies BerthSchedulerId,
      job: "pool.refill",
      payload: { trigger: "schedule" },
      every: (config.warmPools ?? NO_WARM_POOLS).refillIntervalMs,
    }),
  ];
}
