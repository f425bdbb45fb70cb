import type { Redis } from "ioredis";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { BerthSchedulerId } from "@/server/queue/schedulers";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import type { Berth } from "@/server/composition/berth";
import type { OperationsConfig } from "@/server/config/operations";
import type { QuotaConfig } from "@/server/config/quotas";
import { createEnqueue } from "@/server/queue/enqueue";
import { auditFlushProcessor } from "./processors/audit.flush";
import { registerTenantProcessors } from "./processors/tenant.processors";
import { registerCheckpointProcessors } from "./processors/checkpoint.processors";
import { metricsFlushProcessor, metricsSampleProcessor } from "./processors/metrics.flush";
import { RESOURCE_SAMPLE_EVERY_MS } from "@/server/modules/metrics/resource-usage.service";
import { registerWebhookProcessors } from "./processors/webhook.processors";
import { meteringFlushProcessor } from "./processors/metering.flush";
import { registerWorkspaceProcessors } from "./processors/workspace.processors";
import { registerPoolProcessors } from "./processors/pool.processors";
import type { ProcessorRegistry } from "./registry";
import { defineSchedule, type Schedule } from "./schedules";

/** What Berth's processors need from the composition root (workers/runtime.ts). */
export type ProcessorDeps = {
  /** The process' Berth root: its configuration and services. */
  berth: Pick<
    Berth,
    "config" | "db" | "engine" | "workspaces" | "quota" | "usage" | "stageSamples" | "audit" | "lifecycle"
  >;
  redis: Redis;
  redisPrefix: string;
  /** The workspace engine the jobs use (drivers, config, queues, checkpoints); default: the root's. */
  engine?: Pick<WorkspaceEngine, "drivers" | "config" | "queues" | "checkpoints">;
  /** Stage-timing retention and the webhook URL policy; default: the root's configuration. */
  operations?: OperationsConfig;
  /** Decrypts webhook signing secrets; default: the configured encryption key. */
  encryptionKey?: Buffer;
  /** Metering rates (budgets) of the installation. */
  quotas: QuotaConfig;
  /** The workers' job lock duration (WORKERS_LOCK_DURATION_MS); default BullMQ's. */
  lockDurationMs?: number | undefined;
};

/** Every Berth job's processor. Add one line here when a job is added to server/queue/catalog.ts. */
export function registerBerthProcessors(
  registry: ProcessorRegistry<BerthJobCatalog>,
  deps: ProcessorDeps,
): void {
  const engine = deps.engine ?? deps.berth.engine;
  const operations = deps.operations ?? deps.berth.config.operations;
  registry.registerProcessor("audit.flush", auditFlushProcessor({ ...deps, db: deps.berth.db }));
  registry.registerProcessor(
    "metrics.flush",
    metricsFlushProcessor({
      ...deps,
      db: deps.berth.db,
      queues: engine.queues.all(),
      retentionDays: operations.metricsRetentionDays,
      otlp: operations.otlp,
    }),
  );
  registry.registerProcessor(
    "metrics.sample",
    metricsSampleProcessor({
      db: deps.berth.db,
      drivers: engine.drivers,
      retentionDays: operations.metricsRetentionDays,
    }),
  );
  registerWorkspaceProcessors(registry, engine, deps.berth, { lockDurationMs: deps.lockDurationMs });
  registerTenantProcessors(registry, engine, deps.berth);
  registerCheckpointProcessors(registry, engine, deps.berth);
  registerPoolProcessors(registry, engine, deps.berth);
  registerWebhookProcessors(registry, {
    db: deps.berth.db,
    queues: engine.queues,
    secretKey: secretKeyFromBytes(deps.encryptionKey ?? deps.berth.config.secrets.encryptionKey),
    policy: { allowedOrigins: operations.webhookAllowedOrigins },
  });
  const enqueue = createEnqueue(engine.queues);
  registry.registerProcessor(
    "metering.flush",
    meteringFlushProcessor({
      ...deps,
      db: deps.berth.db,
      audit: deps.berth.audit,
      lifecycle: deps.berth.lifecycle,
      requestStop: (payload) => enqueue("workspace.stop", payload),
    }),
  );
}

/** The metering flush's tick: catches writes that raced a flush and accrues running workspaces. */
export function meteringSchedules(quotas: Pick<QuotaConfig, "meteringFlushMs">): Schedule<BerthJobCatalog>[] {
  return [
    defineSchedule<BerthJobCatalog, "metering.flush">({
      id: "metering.flush.tick",
      job: "metering.flush",
      payload: { trigger: "schedule" },
      every: quotas.meteringFlushMs,
    }),
  ];
}

/** Repeating jobs. Each write also requests a flush; this tick only catches writes that raced a flush. */
export const berthSchedules: readonly Schedule<BerthJobCatalog>[] = [
  defineSchedule<BerthJobCatalog, "audit.flush">({
    id: "audit.flush.tick" satisfies BerthSchedulerId,
    job: "audit.flush",
    payload: { trigger: "schedule" },
    every: 10_000,
  }),
  // Stage timings reach Postgres within this interval (recording never enqueues: it is on the hot path).
  defineSchedule<BerthJobCatalog, "metrics.flush">({
    id: "metrics.flush.tick",
    job: "metrics.flush",
    payload: { trigger: "schedule" },
    every: 5_000,
  }),
  // Per-workspace CPU, memory and disk for the workspace page's charts.
  defineSchedule<BerthJobCatalog, "metrics.sample">({
    id: "metrics.sample.tick" satisfies BerthSchedulerId,
    job: "metrics.sample",
    payload: { trigger: "schedule" },
    every: RESOURCE_SAMPLE_EVERY_MS,
  }),
];

/** Per-queue concurrency: audit flushes are cheap and must not race each other for the buffer. */
export const berthConcurrencyByQueue = { audit: 1, metrics: 1, metering: 1 } as const;
