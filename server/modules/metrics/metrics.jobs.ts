import { z } from "zod";
import { JOB_RETENTION } from "@/server/queue/retention";
import { defineJob } from "@/server/queue/types";

/** `metrics.flush`: the stage-timing buffer (Redis) → Postgres, then the retention prune. */
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
} as const;
