import { z } from "zod";
import { deterministicJobId, defineJob } from "@/server/queue/types";

/**
 * `pool.refill` (warm-pool-refill.service.ts): brings every warm pool to its target. Scheduled every
 * BERTH_WARM_POOL_REFILL_INTERVAL_MS and asked for after each claim; the claim's request has a fixed id, so
 * a burst of claims makes one waiting refill, and the rows reserved under a lock keep two that run at once
 * from both filling one gap.
 */
const ZPoolRefillPayload = z.object({
  trigger: z.enum(["schedule", "claim", "manual"]).default("schedule"),
});

export const poolJobs = {
  "pool.refill": defineJob({
    queue: "workspace",
    schema: ZPoolRefillPayload,
    options: {
      attempts: 1,
      removeOnComplete: { age: 60 * 60, count: 50 },
      removeOnFail: { age: 24 * 60 * 60, count: 100 },
    },
    // While one asked-for refill waits or runs, more requests are that one; a finished one is replaced.
    jobId: (p) => deterministicJobId("pool.refill", p.trigger),
    rerunnable: true,
  }),
} as const;
