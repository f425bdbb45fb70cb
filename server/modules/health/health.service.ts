import type { Redis } from "ioredis";
import type { Logger } from "@/server/logger";
import { auditDeadLetters, pendingAuditEntries } from "@/server/modules/audit/audit-buffer.service";
import { aliveWorkers } from "@/server/queue/heartbeat";
import { BERTH_SCHEDULERS, missingSchedulers } from "@/server/queue/schedulers";
import type { DbClient } from "@/server/db";
import { pingDatabase } from "./health.data";
import type { HealthCheckDTO, HealthReportDTO } from "./health.types";

export type HealthDeps = {
  /** The process' database client (the Berth root's). */
  db: DbClient;
  redis: Redis;
  redisPrefix: string;
  /** A worker counts as alive if it beat within this window (WORKERS_HEARTBEAT_TTL_MS). */
  heartbeatTtlMs: number;
  /** Per-check bound, so a hung dependency yields "timeout" rather than a hung health probe. */
  timeoutMs?: number;
  pingDatabase?: () => Promise<void>;
  /** The job schedulers that must exist in Redis (default: Berth's sweep, reconcile and audit flush). */
  expectedSchedulers?: readonly { id: string; queue: string }[];
  log?: Logger;
};

class CheckTimeout extends Error {}

async function timed<T>(
  name: string,
  run: () => Promise<T>,
  deps: HealthDeps,
): Promise<HealthCheckDTO & { value?: T }> {
  const startedAt = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new CheckTimeout()), deps.timeoutMs ?? 5_000);
    });
    const value = await Promise.race([run(), timeout]);
    return { ok: true, latencyMs: Math.round(performance.now() - startedAt), value };
  } catch (error) {
    const isTimeout = error instanceof CheckTimeout;
    deps.log?.warn({ err: isTimeout ? undefined : error, check: name }, "health check failed");
    return {
      ok: false,
      latencyMs: Math.round(performance.now() - startedAt),
      error: isTimeout ? "timeout" : "unreachable",
    };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Database, Redis, worker liveness and the job schedulers, checked in parallel. `status` is "ok" only if all
 * four are: a Redis that lost its data also lost the sweep, reconcile and audit-flush schedulers, and until
 * a worker re-creates them nothing stops idle workspaces, so that is not "ok" either. The
 * audit backlog (entries waiting for a flush, entries set aside because they cannot be stored) is reported
 * beside them: dead letters need an operator's look but do not make the service unavailable.
 */
export async function checkHealth(deps: HealthDeps): Promise<HealthReportDTO> {
  const [database, redis, workers, schedulers, audit] = await Promise.all([
    timed("database", deps.pingDatabase ?? (() => pingDatabase(deps.db)), deps),
    timed("redis", () => deps.redis.ping(), deps),
    timed("workers", () => aliveWorkers(deps.redis, deps.redisPrefix, deps.heartbeatTtlMs), deps),
    timed(
      "schedulers",
      () => missingSchedulers(deps.redis, deps.redisPrefix, deps.expectedSchedulers ?? BERTH_SCHEDULERS),
      deps,
    ),
    timed("audit", () => auditBacklog(deps), deps),
  ]);
  const missing = schedulers.value ?? null;
  const schedulersCheck = {
    ok: schedulers.ok && missing?.length === 0,
    latencyMs: schedulers.latencyMs,
    missing,
    ...(schedulers.ok
      ? missing?.length
        ? { error: "missing scheduler" }
        : {}
      : { error: schedulers.error }),
  };
  const alive = workers.value?.length ?? 0;
  const workersCheck = {
    ok: workers.ok && alive > 0,
    latencyMs: workers.latencyMs,
    alive,
    ...(workers.ok ? (alive > 0 ? {} : { error: "no live worker" }) : { error: workers.error }),
  };
  const ok = database.ok && redis.ok && workersCheck.ok && schedulersCheck.ok;
  return {
    status: ok ? "ok" : "unavailable",
    checkedAt: new Date().toISOString(),
    checks: {
      database: strip(database),
      redis: strip(redis),
      workers: workersCheck,
      schedulers: schedulersCheck,
      audit: {
        ...strip(audit),
        pending: audit.value?.pending ?? null,
        deadLettered: audit.value?.deadLettered ?? null,
      },
    },
  };
}

async function auditBacklog(deps: HealthDeps): Promise<{ pending: number; deadLettered: number }> {
  const [pending, dead] = await Promise.all([
    pendingAuditEntries(deps.redis, deps.redisPrefix),
    auditDeadLetters(deps.redis, deps.redisPrefix, { limit: 0 }),
  ]);
  return { pending, deadLettered: dead.total };
}

function strip(check: HealthCheckDTO & { value?: unknown }): HealthCheckDTO {
  return {
    ok: check.ok,
    latencyMs: check.latencyMs,
    ...(check.error !== undefined && { error: check.error }),
  };
}
