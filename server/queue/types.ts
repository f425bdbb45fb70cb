import type { JobsOptions } from "bullmq";
import type { z } from "zod";

/**
 * One entry of a job catalog: where the job runs, what its payload looks like and how it retries.
 * Producers and consumers both read it, so a payload change is one edit checked on both sides.
 */
type JobSpec = {
  /** Queue (one per resource class, so concurrency and backlogs stay isolated). No ":" allowed. */
  readonly queue: string;
  /** Validated on enqueue AND again on dequeue (jobs written by an older release may still be queued). */
  readonly schema: z.ZodType;
  /** Defaults for every enqueue of this job (attempts, backoff, retention); enqueue options override. */
  readonly options: JobsOptions;
  /**
   * Derives the job id from the payload, so the same logical request enqueued twice (two API replicas,
   * a retried HTTP call) is one job. Omit for jobs that may legitimately run many times.
   */
  readonly jobId?: (payload: never) => string;
  /**
   * The derived id deduplicates concurrent requests only: enqueueing replaces a FINISHED (completed or
   * failed) job under the id instead of returning it, so the same work can run again while the last run
   * stays listed for the retention window (a stop, then a provision of the same workspace, then a stop...).
   */
  readonly rerunnable?: boolean;
};

export type JobCatalog = Readonly<Record<string, JobSpec>>;

export type JobNameOf<C extends JobCatalog> = keyof C & string;
export type QueueNameOf<C extends JobCatalog> = C[keyof C]["queue"];
/** What producers pass (before zod defaults/transforms). */
export type JobPayloadInput<C extends JobCatalog, N extends JobNameOf<C>> = z.input<C[N]["schema"]>;
/** What processors receive (after zod parsing). */
export type JobPayload<C extends JobCatalog, N extends JobNameOf<C>> = z.output<C[N]["schema"]>;

/**
 * Helper to declare one catalog entry with its `jobId` function typed against the schema's output.
 * (A plain object literal cannot infer the parameter type of `jobId` from a sibling property.)
 */
export function defineJob<const Q extends string, S extends z.ZodType>(spec: {
  queue: Q;
  schema: S;
  options: JobsOptions;
  jobId?: (payload: z.output<S>) => string;
  rerunnable?: boolean;
}): {
  queue: Q;
  schema: S;
  options: JobsOptions;
  jobId?: (payload: never) => string;
  rerunnable?: boolean;
} {
  return spec;
}

/**
 * Builds a deterministic BullMQ job id from a job name and domain ids. BullMQ forbids ":" in custom ids
 * (it is its key separator) and purely numeric ids, so parts are joined with "__".
 */
export function deterministicJobId(name: string, ...parts: (string | number)[]): string {
  const id = [name, ...parts.map(String)].join("__");
  if (id.includes(":")) throw new Error(`job id parts must not contain ":" (${id})`);
  return id;
}
