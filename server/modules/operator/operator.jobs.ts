import { z } from "zod";
import { JOB_RETENTION } from "@/server/queue/retention";
import { defineJob, deterministicJobId } from "@/server/queue/types";

export const ZTenantDeletePayload = z.object({
  tenantId: z.string().min(1).max(200),
  /** "operator:<user id>" or "cli": recorded in the purge receipts and the deletion receipt. */
  actor: z.string().min(1).max(200),
});

/**
 * `tenant.delete` (spread into server/queue/catalog.ts): one job per tenant (the id deduplicates a double
 * click or two operators), retried with backoff: each attempt carries on where the last stopped, since
 * purged workspaces are skipped and the rows go in one transaction at the end.
 */
export const operatorJobs = {
  "tenant.delete": defineJob({
    queue: "tenant",
    schema: ZTenantDeletePayload,
    options: {
      attempts: 8,
      backoff: { type: "exponential", delay: 2_000 },
      removeOnComplete: JOB_RETENTION.completed,
      removeOnFail: JOB_RETENTION.failed,
    },
    jobId: (p) => deterministicJobId("tenant.delete", p.tenantId),
  }),
} as const;
