import { DelayedError, UnrecoverableError, Worker, type Job } from "bullmq";
import type { Redis } from "ioredis";
import type { RedisConfig } from "@/server/config/redis";
import type { Logger } from "@/server/logger";
import { bullPrefix, queueNamesOf } from "@/server/queue/queues";
import type { JobCatalog, JobNameOf, JobPayload, QueueNameOf } from "@/server/queue/types";
import { createRedisConnection } from "@/server/redis";
import { isAppError, toAppError } from "@/server/shared/errors";

type ProcessorContext<P> = {
  /** The payload, re-validated against the catalog schema at dequeue time. */
  readonly payload: P;
  readonly job: Job;
  /** Bound with jobId, jobName, queue and attempt. */
  readonly log: Logger;
  /**
   * Aborted when this worker stops or loses the job's lock, with a JobInterrupted reason. Long, resumable
   * work (a purge deleting a million files) stops at its next safe point and throws that reason: the job
   * then waits for the next worker without spending an attempt (see `run`). Work that ignores it finishes
   * within the pool's drain as before.
   */
  readonly signal: AbortSignal;
};

/**
 * Why a job's signal was aborted: `shutdown` (this worker is stopping: the job goes back to the queue at
 * once, its attempt not counted) or `lock-lost` (another worker may have the job now: it is left alone).
 */
class JobInterrupted extends Error {
  constructor(readonly why: "shutdown" | "lock-lost") {
    super(why === "shutdown" ? "the worker is shutting down" : "the job's lock was lost");
    this.name = "JobInterrupted";
  }
}

export type JobProcessor<C extends JobCatalog, N extends JobNameOf<C>> = (
  context: ProcessorContext<JobPayload<C, N>>,
) => Promise<unknown>;

/**
 * Processors by job name for one catalog. Processors stay transport-thin (validate → one service call);
 * this wrapper owns what every job needs: payload validation, logging and the AppError → retry mapping.
 */
export class ProcessorRegistry<C extends JobCatalog> {
  private readonly processors = new Map<string, JobProcessor<C, JobNameOf<C>>>();

  constructor(readonly catalog: C) {}

  registerProcessor<N extends JobNameOf<C>>(name: N, processor: JobProcessor<C, N>): this {
    if (!(name in this.catalog)) throw new Error(`job "${name}" is not in the catalog`);
    if (this.processors.has(name)) throw new Error(`job "${name}" already has a processor`);
    this.processors.set(name, processor);
    return this;
  }

  /** Queues that have at least one registered processor (a Worker is started for each). */
  queues(): QueueNameOf<C>[] {
    return queueNamesOf(this.catalog).filter((queue) =>
      [...this.processors.keys()].some((name) => this.catalog[name]?.queue === queue),
    );
  }

  /** Runs one dequeued job: validate, log, delegate, map errors to BullMQ's retry semantics. */
  async run(job: Job, baseLog: Logger, token?: string, bullSignal?: AbortSignal): Promise<unknown> {
    const signal = interruptionSignal(bullSignal);
    const spec = this.catalog[job.name];
    const maxAttempts = job.opts.attempts ?? 1;
    const log = baseLog.child({
      jobId: job.id,
      jobName: job.name,
      queue: job.queueName,
      attempt: job.attemptsMade + 1,
    });
    const processor = this.processors.get(job.name);
    if (!spec || !processor) {
      log.error("no processor for this job name; failing it without retries");
      throw new UnrecoverableError(`no processor for job "${job.name}"`);
    }
    const parsed = spec.schema.safeParse(job.data);
    if (!parsed.success) {
      // Retrying cannot fix a payload: fail once, loudly. (Issues name fields, never values.)
      log.error(
        { issues: parsed.error.issues.map((i) => ({ path: i.path, code: i.code })) },
        "invalid payload",
      );
      throw new UnrecoverableError(`BAD_REQUEST: invalid payload for "${job.name}"`);
    }

    const startedAt = performance.now();
    // Scheduler ticks run every few seconds: keep them out of the info log unless they do something.
    const quietLevel = job.repeatJobKey ? "debug" : "info";
    log.debug("job started");
    try {
      const result = await processor({
        payload: parsed.data as JobPayload<C, JobNameOf<C>>,
        job,
        log,
        signal,
      });
      log[quietLevel]({ durationMs: Math.round(performance.now() - startedAt) }, "job completed");
      return result;
    } catch (error) {
      const durationMs = Math.round(performance.now() - startedAt);
      if (error instanceof JobInterrupted && signal.aborted) {
        // Stopped at a safe point, not failed: BullMQ's DelayedError leaves the job's attempts alone. On
        // shutdown it goes back to the queue at once; a job whose lock was lost is left to whoever has it
        // (or to stalled-job recovery, as after a crash).
        if (error.why === "shutdown" && token)
          await job.moveToDelayed(Date.now(), token).catch(() => undefined);
        log.info({ durationMs, why: error.why }, "job interrupted; the next worker resumes it");
        throw new DelayedError(error.message);
      }
      if (error instanceof UnrecoverableError) {
        log.error({ err: error, durationMs }, "job failed (unrecoverable)");
        throw error;
      }
      if (isAppError(error) && !error.isRetryable) {
        log.warn({ err: error, code: error.code, durationMs }, "job failed with a non-retryable error");
        // Keep the code in the message: it becomes job.failedReason, which the API and dashboard show.
        throw new UnrecoverableError(`${error.code}: ${error.message}`);
      }
      const willRetry = job.attemptsMade + 1 < maxAttempts;
      // Retryable: an AppError that says so, or anything else (a lost database connection is UNAVAILABLE).
      log[willRetry ? "warn" : "error"](
        { err: error, code: toAppError(error).code, durationMs, maxAttempts },
        willRetry ? "job failed; will retry" : "job failed; no attempts left",
      );
      throw error;
    }
  }
}

/** BullMQ's job signal (its reason a string), as one whose reason is the JobInterrupted to throw. */
function interruptionSignal(bullSignal: AbortSignal | undefined): AbortSignal {
  const interruption = new AbortController();
  const abort = () =>
    interruption.abort(new JobInterrupted(bullSignal?.reason === "lock-lost" ? "lock-lost" : "shutdown"));
  if (bullSignal?.aborted) abort();
  else bullSignal?.addEventListener("abort", abort, { once: true });
  return interruption.signal;
}

export type WorkerPool = {
  readonly workers: readonly Worker[];
  /** Jobs this pool is running now. */
  inFlight(): number;
  /**
   * Stops taking jobs and lets the jobs in flight finish for at most `drainMs` (none in flight: no wait at
   * all), then closes the connections. Bounded whatever Redis does: a Redis that is down (or just back)
   * must not hold a stopping worker for minutes.
   */
  close(options?: { drainMs?: number }): Promise<void>;
};

/** How long a closing pool lets its jobs in flight finish by default. */
const DEFAULT_DRAIN_MS = 15_000;
/** How long a close step that should be instant (no job in flight, a quit) may take before it is cut. */
const CLOSE_STEP_MS = 2_000;

/** True when `promise` settled within `ms` (its rejection counts as settled: closing is best effort). */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true,
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** QUIT while connected (bounded); a connection that is down or reconnecting is simply dropped. */
export async function closeConnection(connection: Redis): Promise<void> {
  if (connection.status === "ready" && (await settlesWithin(connection.quit(), CLOSE_STEP_MS))) return;
  connection.disconnect();
}

/** Starts one BullMQ Worker per queue that has processors. */
export async function startWorkers<C extends JobCatalog>(params: {
  registry: ProcessorRegistry<C>;
  redis: RedisConfig;
  concurrency: number;
  log: Logger;
  /** Per-queue concurrency overrides (e.g. the audit flush must run one at a time). */
  concurrencyByQueue?: Partial<Record<QueueNameOf<C>, number>>;
  /** How often BullMQ looks for jobs whose worker died (their lock expired); BullMQ's default 30 s. */
  stalledIntervalMs?: number;
  /** How long a job's lock lasts without renewal (a killed worker's job is recoverable after it). */
  lockDurationMs?: number;
  /** Told when a job starts, completes or fails here (the tenant change feed: the live jobs page). */
  onJobChange?: (job: Job, state: "active" | "completed" | "failed") => void;
}): Promise<WorkerPool> {
  const { registry, log } = params;
  const connections: Redis[] = [];
  let inFlight = 0;
  // Three parameters: BullMQ hands a job its AbortSignal only to a processor that declares it.
  const run = async (job: Job, token?: string, signal?: AbortSignal) => {
    inFlight++;
    try {
      return await registry.run(job, log, token, signal);
    } finally {
      inFlight--;
    }
  };
  const workers = registry.queues().map((queue) => {
    const connection = createRedisConnection(params.redis, "worker", `berth-worker-${queue}`);
    connections.push(connection);
    const worker = new Worker(queue, run, {
      connection,
      prefix: bullPrefix(params.redis.prefix),
      concurrency: params.concurrencyByQueue?.[queue] ?? params.concurrency,
      ...(params.stalledIntervalMs !== undefined && { stalledInterval: params.stalledIntervalMs }),
      ...(params.lockDurationMs !== undefined && { lockDuration: params.lockDurationMs }),
    });
    // Without a listener a Redis hiccup would be an unhandled 'error' event and kill the process.
    worker.on("error", (error) => log.error({ err: error, queue }, "worker error"));
    const onJobChange = params.onJobChange;
    if (onJobChange) {
      worker.on("active", (job) => onJobChange(job, "active"));
      worker.on("completed", (job) => onJobChange(job, "completed"));
      worker.on("failed", (job) => job && onJobChange(job, "failed"));
    }
    // Another worker may take a job whose lock lapsed: this one stops working on it at its next safe point.
    worker.on("lockRenewalFailed", (jobIds: string[]) => {
      for (const jobId of jobIds) worker.cancelJob(jobId, "lock-lost");
    });
    return worker;
  });
  await Promise.all(workers.map((worker) => worker.waitUntilReady()));
  log.info({ queues: registry.queues() }, "workers started");

  return {
    workers,
    inFlight: () => inFlight,
    async close(options = {}) {
      const running = inFlight;
      // Resumable jobs stop now (their signal) instead of holding the stop for the whole drain.
      for (const worker of workers) worker.cancelAllJobs("shutdown");
      const drained =
        running === 0
          ? // Nothing to wait for: force, so a Redis that is down cannot make BullMQ wait for it.
            await settlesWithin(Promise.all(workers.map((worker) => worker.close(true))), CLOSE_STEP_MS)
          : await settlesWithin(
              Promise.all(workers.map((worker) => worker.close())),
              options.drainMs ?? DEFAULT_DRAIN_MS,
            );
      if (!drained) {
        log.warn({ inFlight }, "workers did not close in time; dropping their connections");
        void Promise.all(workers.map((worker) => worker.close(true))).catch(() => undefined);
      }
      await Promise.all(connections.map((connection) => closeConnection(connection)));
      log.info("workers stopped");
    },
  };
}
