import { z } from "zod";
import { parseEnv, type RawEnv } from "@/server/config/env";
import { AppError } from "@/server/shared/errors";
import { driverDefinition, type DriverName, type DriverRegistry } from "@/server/workspace/drivers/registry";

/** How many idle machines one pool keeps: never fewer than `min`, never more than `max`. */
export type WarmPoolSize = { readonly min: number; readonly max: number };

/**
 * The warm pools of this installation (server/modules/pool/). `pools` is keyed by driver KIND (what a
 * workspace record stores); empty: no pool anywhere, every first use creates its machine.
 */
export type WarmPoolConfig = {
  readonly pools: Readonly<Record<string, WarmPoolSize>>;
  /** How often `pool.refill` tops every pool up (each claim also asks for one at once). */
  readonly refillIntervalMs: number;
};

export const NO_WARM_POOLS: WarmPoolConfig = { pools: {}, refillIntervalMs: 10_000 };

const POOL_ENTRY = /^([a-z][a-z0-9-]*):(\d{1,4})(?:-(\d{1,4}))?$/;

const ZWarmPoolEnv = z.object({
  // Warm pools, comma-separated `<driver>:<min>-<max>` (or `<driver>:<n>` for min = max), e.g.
  // `docker:2-10,local:0-4`. Each pool keeps at least min and at most max idle machines of the driver,
  // aiming at the busiest minute of first uses over the last ten. Unset: no pools.
  BERTH_WARM_POOLS: z.string().default(""),
  BERTH_WARM_POOL_REFILL_INTERVAL_MS: z.coerce.number().int().min(1_000).default(10_000),
});

/** BERTH_WARM_POOLS, each driver enabled here and one that keeps pools (`capabilities.warmPool`). */
export function loadWarmPoolConfig(
  env: RawEnv,
  enabled: readonly DriverName[],
  registry: DriverRegistry,
): WarmPoolConfig {
  const parsed = parseEnv(ZWarmPoolEnv, env, "warm pools");
  const pools: Record<string, WarmPoolSize> = {};
  for (const entry of parsed.BERTH_WARM_POOLS.split(",").map((text) => text.trim())) {
    if (!entry) continue;
    const match = POOL_ENTRY.exec(entry);
    if (!match) throw misconfigured(`BERTH_WARM_POOLS: "${entry}" is not <driver>:<min>-<max>`);
    const [, name, minText, maxText] = match;
    if (!enabled.includes(name as DriverName)) {
      throw misconfigured(
        `BERTH_WARM_POOLS names ${name}, which is not an enabled backend (${enabled.join(", ")})`,
      );
    }
    const min = Number(minText);
    const max = Number(maxText ?? minText);
    if (max < min || max === 0)
      throw misconfigured(`BERTH_WARM_POOLS: ${entry} needs 0 <= min <= max and max >= 1`);
    pools[driverDefinition(name as DriverName, registry).kind] = { min, max };
  }
  return { pools, refillIntervalMs: parsed.BERTH_WARM_POOL_REFILL_INTERVAL_MS };
}

function misconfigured(message: string): AppError {
  return new AppError("INTERNAL", message, {
    userMessage: "Server misconfigured",
    details: { variables: ["BERTH_WARM_POOLS"] },
  });
}
