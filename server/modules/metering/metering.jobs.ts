import { z } from "zod";
import { JOB_RETENTION } from "@/server/queue/retention";
import { defineJob } from "@/server/queue/types";

const ZMeteringFlushPayload = z.object({
  trigger: z.enum(["write", "schedule", "manual"]).default("write"),
});

/** The metering module's jobs, spread into server/queue/catalog.ts. */
export const meteringJobs = {
  "metering.flush": defineJob({
    queue: "metering",
    schema: ZMeteringFlushPayload,
    options: {
      attempts: 5,
      backoff: { type: "exponential", delay: 1_000 },
      removeOnComplete: { age: 10 * 60, count: 100 },
      removeOnFail: JOB_RETENTION.failed,
    },
  }),
} as const;
