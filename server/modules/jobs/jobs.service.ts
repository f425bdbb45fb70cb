import type { Job } from "bullmq";
import { z } from "zod";
import type { TenantScope } from "@/server/auth/scope";
import { audited } from "@/server/modules/audit/audited";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import type { JobCatalog } from "@/server/queue/types";
import type { QueueSet } from "@/server/queue/queues";
import { AppError } from "@/server/shared/errors";
import { redactHostPaths } from "@/server/shared/host-paths";
import { parseInput } from "@/server/shared/parse-input";

/**
 * `jobs.list | retry` for tenant admins. Jobs live in shared queues, so tenancy is the payload's `tenantId`:
 * a job without one (system jobs: audit flush, sweeps) or with another tenant's is invisible and cannot be
 * retried (NOT_FOUND, as for any row of another tenant).
 */
const JOB_STATES = ["active", "waiting", "delayed", "completed", "failed"] as const;

export const ZJobsListRequest = z.object({
  states: z.array(z.enum(JOB_STATES)).min(1).optional(),
  name: z.string().min(1).max(100).optional(),
  limit: z.number().int().min(1).max(200).default(50),
});

export type JobView = {
  id: string;
  queue: string;
  name: string;
  state: string;
  attemptsMade: number;
  /** How many attempts the job gets in all (1 when it is not retried on failure). */
  attemptsMax: number;
  /** Why the last attempt failed (the processor's error), for failed jobs and those waiting to retry. */
  failedReason: string | null;
  data: unknown;
  createdAt: Date;
  finishedAt: Date | null;
};

const DEPTH_STATES = ["waiting", "active", "delayed", "failed"] as const;

export const ZQueueDepthView = z.object({
  queue: z.string(),
  waiting: z.number().int(),
  active: z.number().int(),
  delayed: z.number().int(),
  failed: z.number().int(),
  capped: z.boolean(),
});
type QueueDepthView = z.output<typeof ZQueueDepthView>;

/** How many recent jobs per queue and state are scanned for the tenant's (a dashboard, not an archive). */
const SCAN_PER_STATE = 1_000;

/** `audit`: where retries are audited (the root's `berth.audit`). */
export function createJobsService<C extends JobCatalog>(queues: QueueSet<C>, audit: AuditRecorder) {
  const ownedBy = (scope: TenantScope, job: Job | undefined): job is Job =>
    !!job && (job.data as { tenantId?: unknown } | null)?.tenantId === scope.tenantId;

  async function toView(job: Job, state?: string): Promise<JobView> {
    return {
      id: job.id ?? "",
      queue: job.queueName,
      name: job.name,
      state: state ?? (await job.getState()),
      attemptsMade: job.attemptsMade,
      attemptsMax: job.opts.attempts ?? 1,
      failedReason: job.failedReason ? redactHostPaths(job.failedReason) : null,
      data: job.data,
      createdAt: new Date(job.timestamp),
      finishedAt: job.finishedOn ? new Date(job.finishedOn) : null,
    };
  }

  return {
    async list(scope: TenantScope, raw: z.input<typeof ZJobsListRequest>): Promise<JobView[]> {
      const input = parseInput(ZJobsListRequest, raw);
      const views: JobView[] = [];
      for (const queue of queues.all()) {
        for (const state of input.states ?? JOB_STATES) {
          const jobs = (await queue.getJobs([state], 0, SCAN_PER_STATE - 1)) as (Job | undefined)[];
          for (const job of jobs) {
            if (!ownedBy(scope, job)) continue;
            if (input.name && job.name !== input.name) continue;
            views.push(await toView(job, state));
          }
        }
      }
      views.sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
      return views.slice(0, input.limit);
    },

    /**
     * The tenant's jobs per queue that are waiting, active, delayed (retries, schedules) or failed: the
     * Overview's queue-depth tile. Each state counts among its newest SCAN_PER_STATE jobs; `capped` says a
     * state held more than that (the count is then a lower bound).
     */
    async depth(scope: TenantScope): Promise<QueueDepthView[]> {
      const views: QueueDepthView[] = [];
      for (const queue of queues.all()) {
        const view: QueueDepthView = {
          queue: queue.name,
          waiting: 0,
          active: 0,
          delayed: 0,
          failed: 0,
          capped: false,
        };
        for (const state of DEPTH_STATES) {
          const jobs = (await queue.getJobs([state], 0, SCAN_PER_STATE - 1)) as (Job | undefined)[];
          if (jobs.length >= SCAN_PER_STATE) view.capped = true;
          view[state] = jobs.filter((job) => ownedBy(scope, job)).length;
        }
        views.push(view);
      }
      return views;
    },

    /** Retries a failed job of the tenant; anything else is a CONFLICT (it is not failed) or NOT_FOUND. */
    async retry(scope: TenantScope, jobId: string): Promise<JobView> {
      return audited(audit, scope, { action: "jobs.retry", targetType: "job", targetId: jobId }, async () => {
        for (const queue of queues.all()) {
          const job = (await queue.getJob(jobId)) as Job | undefined;
          if (!ownedBy(scope, job)) continue;
          const state = await job.getState();
          if (state !== "failed") {
            throw new AppError("CONFLICT", `job ${jobId} is ${state}, not failed`, {
              userMessage: "Only failed jobs can be retried.",
              details: { state },
            });
          }
          await job.retry("failed");
          return toView(job, "waiting");
        }
        throw new AppError("NOT_FOUND", `job ${jobId} not found`, { userMessage: "Job not found." });
      });
    },
  };
}

export type JobsService = ReturnType<typeof createJobsService>;
