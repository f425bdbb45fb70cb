/**
 * How long finished jobs stay in Redis, and so on the jobs page: the ONE retention window of the tenant jobs
 * (provision, stop, purge, session and agent purges), per queue, whichever limit is reached first (seconds,
 * jobs). NOTE: a jobId deduplicates while a job with that id exists, finished or not, so a job that must run
 * again for the same domain id either has a generation in its id (purge) or is declared `rerunnable`
 * (provision, stop: enqueue replaces a finished job under the id, see server/queue/enqueue.ts).
 */
export const JOB_RETENTION = {
  completed: { age: 24 * 60 * 60, count: 1_000 },
  failed: { age: 7 * 24 * 60 * 60, count: 5_000 },
} as const;
