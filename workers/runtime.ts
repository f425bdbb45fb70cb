import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { RedisConfig } from "@/server/config/redis";
import type { WorkersConfig } from "@/server/config/workers";
import type { Logger } from "@/server/logger";
import { jobCatalog, type BerthJobCatalog } from "@/server/queue/catalog";
import { startHeartbeat } from "@/server/queue/heartbeat";
import { createQueues } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import { startHealthServer } from "./health";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { getEngine } from "@/server/composition/services";
import { loadQuotaConfig, type QuotaConfig } from "@/server/config/quotas";
import {
  berthConcurrencyByQueue,
  berthSchedules,
  meteringSchedules,
  registerBerthProcessors,
} from "./processors";
import { workspaceSchedules } from "./processors/workspace.processors";
import { ProcessorRegistry, startWorkers } from "./registry";
import { applySchedules, type Schedule } from "./schedules";

export type WorkerRuntime = {
  readonly workerId: string;
  /** Port of the /live + /ready server, or undefined when disabled. */
  readonly healthPort: number | undefined;
  isReady(): boolean;
  /** Graceful: readiness off → stop taking jobs and let in-flight ones finish → close connections. */
  stop(): Promise<void>;
};

/**
 * Starts Berth's workers in this process: processors for every catalog job, the schedules, a Redis
 * heartbeat (what /api/health reads) and optionally the /live + /ready endpoint. Used by workers/main.ts
 * (standalone process) and scripts/start.ts (in-process next to the web server).
 */
export async function startWorkerRuntime(params: {
  redis: RedisConfig;
  workers: WorkersConfig;
  log: Logger;
  /** Override the health port (0 = pick a free one, null = no health server). */
  healthPort?: number | null;
  /** Override the processors (tests); defaults to Berth's. */
  register?: (registry: ProcessorRegistry<BerthJobCatalog>) => void;
  schedules?: readonly Schedule<BerthJobCatalog>[];
  /** The workspace engine the workspace jobs use; defaults to the process-wide getEngine(). */
  engine?: Pick<WorkspaceEngine, "drivers" | "config" | "queues">;
  /** Quotas and metering rates; defaults to the environment's. */
  quotas?: QuotaConfig;
}): Promise<WorkerRuntime> {
  const quotas = params.quotas ?? loadQuotaConfig();
  const workerId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const log = params.log.child({ component: "workers", workerId });
  const connection = createRedisConnection(params.redis, "producer", "berth-worker-runtime");
  const queues = createQueues(jobCatalog, { connection, redis: params.redis, log });

  const registry = new ProcessorRegistry(jobCatalog);
  if (params.register) params.register(registry);
  else
    registerBerthProcessors(registry, {
      redis: connection,
      redisPrefix: params.redis.prefix,
      engine: params.engine ?? getEngine(),
      quotas,
    });

  const pool = await startWorkers({
    registry,
    redis: params.redis,
    concurrency: params.workers.concurrency,
    concurrencyByQueue: berthConcurrencyByQueue,
    stalledIntervalMs: params.workers.stalledIntervalMs,
    lockDurationMs: params.workers.lockDurationMs,
    log,
  });
  await applySchedules(
    queues,
    params.schedules ?? [
      ...berthSchedules,
      ...meteringSchedules(quotas),
      ...workspaceSchedules((params.engine ?? getEngine()).config),
    ],
    log,
  );

  const heartbeat = startHeartbeat({
    redis: connection,
    redisPrefix: params.redis.prefix,
    workerId,
    // Three beats per TTL window: one lost beat must not make a healthy worker look dead.
    intervalMs: Math.max(500, Math.floor(params.workers.heartbeatTtlMs / 3)),
    onError: (error) => log.warn({ err: error }, "heartbeat failed"),
  });
  await heartbeat.ready;

  let ready = true;
  const healthPort = params.healthPort === undefined ? params.workers.healthPort || null : params.healthPort;
  const health =
    healthPort === null
      ? undefined
      : await startHealthServer({ port: healthPort, isReady: () => ready, log });

  let stopping: Promise<void> | undefined;
  return {
    workerId,
    healthPort: health?.port,
    isReady: () => ready,
    stop() {
      stopping ??= (async () => {
        ready = false;
        log.info("stopping workers (waiting for jobs in flight)");
        await heartbeat.stop();
        await pool.close();
        await queues.close();
        await connection.quit().catch(() => connection.disconnect());
        await health?.close();
      })();
      return stopping;
    },
  };
}
