import { z } from "zod";
import { JOB_RETENTION } from "@/server/queue/retention";
import { deterministicJobId, defineJob } from "@/server/queue/types";

/**
 * `checkpoint.restore`: writes a checkpoint's files into a workspace (a revert, a fork). One job per
 * restore (its id), retried with backoff: the restore is convergent, so a retry after a killed worker
 * finishes what the first run began, and the workspace takes no other lease until it has.
 */
const ZCheckpointRestorePayload = z.object({
  tenantId: z.string().min(1).max(200),
  restoreId: z.string().min(1).max(200),
});

export const checkpointJobs = {
  "checkpoint.restore": defineJob({
    queue: "workspace",
    schema: ZCheckpointRestorePayload,
    options: {
      attempts: 6,
      backoff: { type: "exponential", delay: 1_000 },
      removeOnComplete: JOB_RETENTION.completed,
      removeOnFail: JOB_RETENTION.failed,
    },
    jobId: (p) => deterministicJobId("checkpoint.restore", p.restoreId),
  }),
} as const;
