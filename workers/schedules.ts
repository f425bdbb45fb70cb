import type { JobSchedulerTemplateOptions, JobsOptions } from "bullmq";
import type { Logger } from "@/server/logger";
import type { QueueSet } from "@/server/queue/queues";
import type { JobCatalog, JobNameOf, JobPayloadInput } from "@/server/queue/types";

/** A repeating job: BullMQ's job scheduler creates one job per tick, whatever the number of workers. */
export type Schedule<C extends JobCatalog, N extends JobNameOf<C> = JobNameOf<C>> = {
  /** Stable id: re-applying the same id updates the schedule instead of adding a second one. */
  readonly id: string;
  readonly job: N;
  readonly payload: JobPayloadInput<C, N>;
  readonly every?: number;
  /** Cron pattern (alternative to `every`). */
  readonly pattern?: string;
};

/** Declares a schedule with its payload typed from the catalog. */
export function defineSchedule<C extends JobCatalog, N extends JobNameOf<C>>(
  schedule: Schedule<C, N>,
): Schedule<C> {
  return schedule;
}

/**
 * Makes the queues' schedulers match `schedules` exactly: upserts each (idempotent, safe from every
 * worker process at boot) and removes schedulers that are no longer declared, so deleting a schedule
 * from code stops it on the next deploy.
 */
export async function applySchedules<C extends JobCatalog>(
  queues: QueueSet<C>,
  schedules: readonly Schedule<C>[],
  log: Logger,
): Promise<void> {
  for (const schedule of schedules) {
    const spec = queues.catalog[schedule.job];
    if (!spec) throw new Error(`schedule "${schedule.id}" names unknown job "${schedule.job}"`);
    const payload: unknown = spec.schema.parse(schedule.payload);
    const queue = queues.get(spec.queue);
    await queue.upsertJobScheduler(
      schedule.id,
      schedule.pattern !== undefined ? { pattern: schedule.pattern } : { every: schedule.every ?? 60_000 },
      { name: schedule.job, data: payload, opts: stripJobIdentity(spec.options) },
    );
  }
  const declared = new Set(schedules.map((schedule) => schedule.id));
  for (const queue of queues.all()) {
    for (const existing of await queue.getJobSchedulers()) {
      if (existing.key && !declared.has(existing.key)) {
        await queue.removeJobScheduler(existing.key);
        log.info({ queue: queue.name, scheduler: existing.key }, "removed a schedule no longer declared");
      }
    }
  }
  log.info({ schedules: [...declared] }, "schedules applied");
}

// Scheduler templates take job options minus the ones a scheduler controls itself.
function stripJobIdentity(options: JobsOptions): JobSchedulerTemplateOptions {
  const { jobId: _jobId, delay: _delay, deduplication: _dedup, ...rest } = options;
  return rest;
}
