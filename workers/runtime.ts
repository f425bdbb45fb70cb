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
import type { Berth } from "@/server/composition/berth";
import { processBerth } from "@/server/composition/process-berth";
import { announceJobChange } from "@/server/modules/live/job-changes";
import { loadQuotaConfig, type QuotaConfig } from "@/server/config/quotas";
import {
  berthConcurrencyByQueue,
  berthSchedules,
  meteringSchedules,
  registerBerthProcessors,
  type ProcessorDeps,
} from "./processors";
import { checkpointSchedules } from "./processors/checkpoint.processors";
import { workspaceSchedules } from "./processors/workspace.processors";
import { poolSchedules } from "./processors/pool.processors";
import { closeConnection, ProcessorRegistry, settlesWithin, startWorkers } from "./registry";
import { applySchedules, keepSchedules, missingSchedules, type Schedule } from "./schedules";

export type WorkerRuntime = {
  readonly workerId: string;
  /** Port of the /live + /ready server, or undefined when disabled. */
  readonly healthPort: number | undefined;
  isReady(): boolean;
  /** Declared schedules missing from Redis now (what /ready reports; re-created by the keeper). */
  missingSchedules(): Promise<string[]>;
  /**
   * Graceful and bounded: readiness off → stop taking jobs and let in-flight ones finish (no wait when none
   * is in flight; at most `drainMs` otherwise) → close connections, whatever state Redis is in.
   */
  stop(): Promise<void>;
};

/** How often a running worker checks that its schedules still exist in Redis (and re-creates them). */
const SCHEDULE_CHECK_INTERVAL_MS = 30_000;

/**
 * Starts Berth's workers in this process: processors for every catalog job, the schedules (kept in Redis
 * while it runs), a Redis heartbeat (what /api/health reads) and optionally the /live + /ready endpoint,
 * which listens first, so a port clash fails before any job is taken. Used by workers/main.ts (standalone
 * process) and scripts/start.ts (in-process next to the web server).
 */
export async function startWorkerRuntime(params: {
  /**
   * The process' Berth root (its database, engine and services). Default: the process' one, looked up
   * whenever a job needs it (tests install a root over their harness' engine after the runtime started).
   */
  berth?: Berth;
  redis: RedisConfig;
  workers: WorkersConfig;
  log: Logger;
  /** Override the health port (0 = pick a free one, null = no health server). */
  healthPort?: number | null;
  /** Override the processors (tests); defaults to Berth's. */
  register?: (registry: ProcessorRegistry<BerthJobCatalog>) => void;
  schedules?: readonly Schedule<BerthJobCatalog>[];
  /** How often the schedules are checked and re-created when missing (default 30 s; also on reconnect). */
  scheduleCheckIntervalMs?: number;
  /** The workspace engine the workspace jobs use; default: the root's. */
  engine?: Pick<WorkspaceEngine, "drivers" | "config" | "queues" | "checkpoints">;
  /** Quotas and metering rates; defaults to the environment's. */
  quotas?: QuotaConfig;
}): Promise<WorkerRuntime> {
  const berth: ProcessorDeps["berth"] = params.berth ?? currentProcessBerth();
  const quotas = params.quotas ?? loadQuotaConfig();
  const workerId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const log = params.log.child({ component: "workers", workerId });
  let ready = false;
  let keeper: ReturnType<typeof keepSchedules<BerthJobCatalog>> | undefined;
  const missing = async (): Promise<string[]> =>
    keeper ? missingSchedules(queues, connection, schedules) : [];
  const healthPort = params.healthPort === undefined ? params.workers.healthPort || null : params.healthPort;
  // First: a port clash (EADDRINUSE, e.g. the previous worker still draining) must fail this process
  // before it takes a job, not after.
  const health =
    healthPort === null
      ? undefined
      : await startHealthServer({
          port: healthPort,
          readiness: async () => {
            if (!ready) return { ready: false };
            const absent = await missing();
            return absent.length === 0
              ? { ready: true }
              : { ready: false, detail: { missingSchedules: absent } };
          },
          log,
        });

  const connection = createRedisConnection(params.redis, "producer", "berth-worker-runtime");
  const queues = createQueues(jobCatalog, { connection, redis: params.redis, log });
  const schedules = params.schedules ?? [
    ...berthSchedules,
    ...meteringSchedules(quotas),
    ...workspaceSchedules((params.engine ?? berth.engine).config),
    ...poolSchedules((params.engine ?? berth.engine).config),
    ...checkpointSchedules,
  ];
  try {
    const registry = new ProcessorRegistry(jobCatalog);
    if (params.register) params.register(registry);
    else
      registerBerthProcessors(registry, {
        berth,
        redis: connection,
        redisPrefix: params.redis.prefix,
        engine: params.engine ?? berth.engine,
        quotas,
        lockDurationMs: params.workers.lockDurationMs,
      });

    const pool = await startWorkers({
      registry,
      redis: params.redis,
      concurrency: params.workers.concurrency,
      concurrencyByQueue: berthConcurrencyByQueue,
      stalledIntervalMs: params.workers.stalledIntervalMs,
      lockDurationMs: params.workers.lockDurationMs,
      onJobChange: announceJobChange,
      log,
    });
    await applySchedules(queues, schedules, log);
    keeper = keepSchedules({
      queues,
      connection,
      schedules,
      intervalMs: params.scheduleCheckIntervalMs ?? SCHEDULE_CHECK_INTERVAL_MS,
      log,
    });

    const heartbeat = startHeartbeat({
      redis: connection,
      redisPrefix: params.redis.prefix,
      workerId,
      // Three beats per TTL window: one lost beat must not make a healthy worker look dead.
      intervalMs: Math.max(500, Math.floor(params.workers.heartbeatTtlMs / 3)),
      onError: (error) => log.warn({ err: error }, "heartbeat failed"),
    });
    await heartbeat.ready;
    ready = true;

    let stopping: Promise<void> | undefined;
    return {
      workerId,
      healthPort: health?.port,
      isReady: () => ready,
      missingSchedules: missing,
      stop() {
        stopping ??= (async () => {
          ready = false;
          keeper?.stop();
          const inFlight = pool.inFlight();
          log.info(
            { inFlight },
            inFlight > 0 ? "stopping workers (waiting for jobs in flight)" : "stopping workers",
          );
          // Each step is bounded: with Redis down, a deregistration or a QUIT would otherwise wait for it.
          await settlesWithin(heartbeat.stop(), 2_000);
          await pool.close();
          await settlesWithin(queues.close(), 2_000);
          await closeConnection(connection);
          await health?.close();
        })();
        return stopping;
      },
    };
  } catch (error) {
    keeper?.stop();
    await settlesWithin(queues.close(), 2_000);
    await closeConnection(connection);
    await health?.close();
    throw error;
  }
}

/** The process' root as it is when read (see `berth` of startWorkerRuntime). */
function currentProcessBerth(): ProcessorDeps["berth"] {
  return {
    get config() {
      return processBerth().config;
    },
    get db() {
      return processBerth().db;
    },
    get quota() {
      return processBerth().quota;
    },
    get engine() {
      return processBerth().engine;
    },
    get workspaces() {
      return processBerth().workspaces;
    },
    get audit() {
      return processBerth().audit;
    },
    get lifecycle() {
      return processBerth().lifecycle;
    },
    get usage() {
      return processBerth().usage;
    },
    get stageSamples() {
      return processBerth().stageSamples;
    },
  };
}
