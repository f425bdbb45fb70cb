import type { Job, JobsOptions, Queue } from "bullmq";
import { AppError } from "@/server/shared/errors";
import type { QueueSet } from "./queues";
import type { JobCatalog, JobNameOf, JobPayload, JobPayloadInput } from "./types";

type EnqueueOptions = {
  /** Overrides the catalog's derived id. Same id while a job with it exists → the existing job. */
  jobId?: string;
  /**
   * Deduplicate while a job with this id is waiting, delayed or active (BullMQ "simple mode"); unlike
   * `jobId` it allows the same work again once the previous run finished.
   */
  deduplicationId?: string;
  delay?: number;
  priority?: number;
  attempts?: number;
};

export type Enqueue<C extends JobCatalog> = <N extends JobNameOf<C>>(
  name: N,
  payload: JobPayloadInput<C, N>,
  options?: EnqueueOptions,
) => Promise<Job<JobPayload<C, N>>>;

/** Builds a typed `enqueue` over a catalog and its queues (tests pass their own catalog). */
export function createEnqueue<C extends JobCatalog>(queues: QueueSet<C>): Enqueue<C> {
  return async (name, payload, options = {}) => {
    const spec = queues.catalog[name];
    if (!spec) throw new AppError("BAD_REQUEST", `unknown job "${name}"`);
    // Validate on the producer side too: a bad payload is a caller bug, reported to the caller
    // instead of becoming a job that can only fail.
    const parsed = spec.schema.safeParse(payload);
    if (!parsed.success) {
      throw new AppError("BAD_REQUEST", `invalid payload for job "${name}": ${parsed.error.message}`, {
        details: { job: name },
      });
    }
    const data = parsed.data as JobPayload<C, typeof name>;
    const jobId = options.jobId ?? spec.jobId?.(data as never);
    const opts: JobsOptions = {
      ...spec.options,
      ...(jobId !== undefined && { jobId }),
      ...(options.deduplicationId !== undefined && { deduplication: { id: options.deduplicationId } }),
      ...(options.delay !== undefined && { delay: options.delay }),
      ...(options.priority !== undefined && { priority: options.priority }),
      ...(options.attempts !== undefined && { attempts: options.attempts }),
    };
    const queue = queues.get(spec.queue);
    if (spec.rerunnable && jobId !== undefined) await removeFinished(queue, jobId);
    return (await queue.add(name, data, opts)) as Job<JobPayload<C, typeof name>>;
  };
}

/**
 * Makes room for a new run under `jobId` when the job there has finished. A job that is waiting, delayed or
 * active stays (the new request joins it); losing a race with another producer's removal or a worker that
 * just took the job is harmless: the add then finds the live job or adds the only one.
 */
async function removeFinished(queue: Queue, jobId: string): Promise<void> {
  const previous = (await queue.getJob(jobId)) as Job | undefined;
  if (!previous) return;
  const state = await previous.getState();
  if (state === "completed" || state === "failed") await previous.remove().catch(() => undefined);
}
