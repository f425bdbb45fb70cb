import type { JobSchedulerTemplateOptions, JobsOptions } from "bullmq";
import type { Redis } from "ioredis";
import type { Logger } from "@/server/logger";
import type { QueueSet } from "@/server/queue/queues";
import { missingSchedulers } from "@/server/queue/schedulers";
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
  for (const schedule of schedules) await upsertSchedule(queues, schedule);
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

async function upsertSchedule<C extends JobCatalog>(
  queues: QueueSet<C>,
  schedule: Schedule<C>,
): Promise<void> {
  const spec = queues.catalog[schedule.job];
  if (!spec) throw new Error(`schedule "${schedule.id}" names unknown job "${schedule.job}"`);
  const payload: unknown = spec.schema.parse(schedule.payload);
  await queues
    .get(spec.queue)
    .upsertJobScheduler(
      schedule.id,
      schedule.pattern !== undefined ? { pattern: schedule.pattern } : { every: schedule.every ?? 60_000 },
      { name: schedule.job, data: payload, opts: stripJobIdentity(spec.options) },
    );
}

/** The declared schedules whose scheduler is missing from Redis (ids). */
export async function missingSchedules<C extends JobCatalog>(
  queues: QueueSet<C>,
  connection: Redis,
  schedules: readonly Schedule<C>[],
): Promise<string[]> {
  const expected = schedules.map((schedule) => ({
    id: schedule.id,
    queue: String(queues.catalog[schedule.job]?.queue),
  }));
  return missingSchedulers(connection, queues.redisPrefix, expected);
}

/**
 * Keeps the schedules in Redis while the workers run. A Redis that loses its data (a restart without
 * persistence, a failover) loses the schedulers with it, and nothing else recreates them until a worker
 * restarts: the sweep, reconcile and audit flush would silently stop. Every `intervalMs`, and as soon as
 * `connection` reconnects, the missing ones are upserted again (only the missing ones: re-upserting a live
 * scheduler would move its next run). Safe from any number of workers at once (upserts by id).
 */
export function keepSchedules<C extends JobCatalog>(params: {
  queues: QueueSet<C>;
  connection: Redis;
  schedules: readonly Schedule<C>[];
  intervalMs: number;
  log: Logger;
}): { reassert(): Promise<string[]>; stop(): void } {
  const { queues, connection, schedules, log } = params;
  let running: Promise<string[]> | undefined;
  const reassert = (): Promise<string[]> =>
    (running ??= (async () => {
      try {
        const missing = new Set(await missingSchedules(queues, connection, schedules));
        for (const schedule of schedules)
          if (missing.has(schedule.id)) await upsertSchedule(queues, schedule);
        if (missing.size > 0) log.warn({ schedules: [...missing] }, "re-created missing schedules");
        return [...missing];
      } catch (error) {
        // Redis is down: the next tick or the reconnect tries again.
        log.warn({ err: error }, "could not check the schedules");
        return [];
      } finally {
        running = undefined;
      }
    })());
  const timer = setInterval(() => void reassert(), params.intervalMs);
  timer.unref();
  // ioredis emits "ready" on every (re)connect; the first one happened before the workers started.
  const onReady = () => void reassert();
  connection.on("ready", onReady);
  return {
    reassert,
    stop() {
      clearInterval(timer);
      connection.off("ready", onReady);
    },
  };
}

// Scheduler templates take job options minus the ones a scheduler controls itself.
function stripJobIdentity(options: JobsOptions): JobSchedulerTemplateOptions {
  const { jobId: _jobId, delay: _delay, deduplication: _dedup, ...rest } = options;
  return rest;
}
