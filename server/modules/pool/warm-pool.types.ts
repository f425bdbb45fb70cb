import { z } from "zod";

/** One warm pool as operators see it (the operator console's Warm pools page, `operator.warmPools`). */
export const ZWarmPoolView = z.object({
  /** The driver kind (what workspace records store). */
  backend: z.string(),
  /** The driver's label for people. */
  label: z.string(),
  min: z.number().int(),
  max: z.number().int(),
  /** What the refill aims at now: the busiest minute of the demand window, within [min, max]. */
  target: z.number().int(),
  idle: z.number().int(),
  creating: z.number().int(),
  claimed: z.number().int(),
  /** First uses over the demand window served by the pool, and not served (created instead). */
  hits: z.number().int(),
  misses: z.number().int(),
  /** Median claim and bind of warm provisions over the demand window; null: none. */
  claimP50Ms: z.number().nullable(),
  windowMinutes: z.number().int(),
});
export type TWarmPoolView = z.infer<typeof ZWarmPoolView>;
