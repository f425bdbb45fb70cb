import { z } from "zod";
import { JOB_RETENTION } from "@/server/queue/retention";
import { defineJob } from "@/server/queue/types";

/**
 * `metrics.flush`: the stage-timing buffer (Redis) → Postgres, then the retention prune. `metrics.sample`:
 * every READY workspace's resource use from its backend (resource-usage.service.ts).
 */
export const metricsJobs = {
  "metrics.flush": defineJob({
    queue: "metrics",
    schema: z.object({ trigger: z.enum(["schedule", "manual"]).default("schedule") }),
    options: {
      attempts: 3,
      backoff: { type: "exponential", delay: 1_000 },
      removeOnComplete: { age: 10 * 60, count: 100 },
      removeOnFail: JOB_RETENTION.failed,
    },
  }),
  "metrics.sample": defineJob({
    queue: "metrics",
    schema: z.object({ trigger: z.enum(["schedule", "manual"]).default("schedule") }),
    options: {
      // A missed tick is a gap in a chart, not a loss: the next one samples again.
      attempts: 1,
      removeOnComplete: { age: 10 * 60, count: 100 },
      removeOnFail: JOB_RETENTION.failed,
    },
  }),
} as const;
