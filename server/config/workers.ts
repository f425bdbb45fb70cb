import { z } from "zod";
import { parseEnv, readProcessEnv, type RawEnv } from "./env";

const ZWorkersEnv = z.object({
  // Jobs processed in parallel per queue and process. Most jobs wait on Docker or the database, not CPU.
  WORKERS_CONCURRENCY: z.coerce.number().int().min(1).max(100).default(4),
  // /live and /ready for `npm run workers` (a separate process). 0 disables it; `npm start` runs the
  // workers in-process and reports them through /api/health instead.
  WORKERS_HEALTH_PORT: z.coerce.number().int().min(0).max(65_535).default(3001),
  // How long a worker process counts as alive after its last heartbeat.
  WORKERS_HEARTBEAT_TTL_MS: z.coerce.number().int().min(1_000).default(15_000),
  // Stalled-job recovery: a job whose worker died (lock not renewed for WORKERS_LOCK_DURATION_MS) is put
  // back in the queue by the next stalled check (every WORKERS_STALLED_INTERVAL_MS). BullMQ's defaults.
  WORKERS_STALLED_INTERVAL_MS: z.coerce.number().int().min(100).default(30_000),
  WORKERS_LOCK_DURATION_MS: z.coerce.number().int().min(100).default(30_000),
});

const ZApiOnlyEnv = z.object({
  // `npm start` serves the API and dashboard only and runs no BullMQ worker (a Deployment of API replicas
  // beside `npm run workers` replicas, each scaled on its own). /api/health still needs a live worker, by
  // its Redis heartbeat, so a cluster without any worker process is reported unhealthy.
  BERTH_API_ONLY: z.stringbool().default(false),
});

export type WorkersConfig = {
  readonly concurrency: number;
  readonly healthPort: number;
  readonly heartbeatTtlMs: number;
  readonly stalledIntervalMs?: number;
  readonly lockDurationMs?: number;
};

export function loadWorkersConfig(env: RawEnv = readProcessEnv()): WorkersConfig {
  const parsed = parseEnv(ZWorkersEnv, env, "workers");
  return {
    concurrency: parsed.WORKERS_CONCURRENCY,
    healthPort: parsed.WORKERS_HEALTH_PORT,
    heartbeatTtlMs: parsed.WORKERS_HEARTBEAT_TTL_MS,
    stalledIntervalMs: parsed.WORKERS_STALLED_INTERVAL_MS,
    lockDurationMs: parsed.WORKERS_LOCK_DURATION_MS,
  };
}

/** true: `npm start` runs no workers in its process (BERTH_API_ONLY). */
export function loadApiOnly(env: RawEnv = readProcessEnv()): boolean {
  return parseEnv(ZApiOnlyEnv, env, "workers").BERTH_API_ONLY;
}
