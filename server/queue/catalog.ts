import { z } from "zod";
import { operatorJobs } from "@/server/modules/operator/operator.jobs";
import { metricsJobs } from "@/server/modules/metrics/metrics.jobs";
import { webhookJobs } from "@/server/modules/webhook/webhook.jobs";
import { meteringJobs } from "@/server/modules/metering/metering.jobs";
import { workspaceJobs } from "@/server/modules/workspace/workspace.jobs";
import { checkpointJobs } from "@/server/modules/checkpoint/checkpoint.jobs";
import { poolJobs } from "@/server/modules/pool/warm-pool.jobs";
import { JOB_RETENTION } from "./retention";
import { defineJob, type JobCatalog } from "./types";

const KEEP_FAILED = JOB_RETENTION.failed;

const ZAuditFlushPayload = z.object({
  // Why this flush was requested; only for logs and the jobs dashboard.
  trigger: z.enum(["write", "schedule", "manual"]).default("write"),
});

/**
 * The single contract between producers (API, services) and consumers (workers/): job name → queue,
 * payload schema and default options. Add a job here, then its processor in workers/processors.ts.
 * New payload fields must be `.optional()` until jobs enqueued by the previous release have drained.
 */
export const jobCatalog = {
  "audit.flush": defineJob({
    queue: "audit",
    schema: ZAuditFlushPayload,
    options: {
      attempts: 5,
      backoff: { type: "exponential", delay: 1_000 },
      removeOnComplete: { age: 10 * 60, count: 100 },
      removeOnFail: KEEP_FAILED,
    },
  }),
  // workspace.provision | stop | purge | sweep | reconcile, session.purge, agent.purge.
  ...workspaceJobs,
  // checkpoint.restore: a revert's or fork's files (turn checkpoints).
  ...checkpointJobs,
  // pool.refill: the warm pools kept at their targets.
  ...poolJobs,
  // tenant.delete (operators: purge every workspace, delete the rows, leave a receipt).
  ...operatorJobs,
  // metrics.flush (stage timings → Postgres); webhook.dispatch | deliver (lifecycle webhooks).
  ...metricsJobs,
  ...webhookJobs,
  // metering.flush: the usage buffer → the UsageRecord ledger, then the budgets.
  ...meteringJobs,
} as const satisfies JobCatalog;

export type BerthJobCatalog = typeof jobCatalog;
