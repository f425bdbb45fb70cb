import type { Redis } from "ioredis";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { getEngine } from "@/server/composition/services";
import type { QuotaConfig } from "@/server/config/quotas";
import { createEnqueue } from "@/server/queue/enqueue";
import { auditFlushProcessor } from "./processors/audit.flush";
import { meteringFlushProcessor } from "./processors/metering.flush";
import { registerWorkspaceProcessors } from "./processors/workspace.processors";
import type { ProcessorRegistry } from "./registry";
import { defineSchedule, type Schedule } from "./schedules";

/** What Berth's processors need from the composition root (workers/runtime.ts). */
export type ProcessorDeps = {
  redis: Redis;
  redisPrefix: string;
  /** The process' workspace engine (drivers, config, queues); defaults to getEngine(). */
  engine?: Pick<WorkspaceEngine, "drivers" | "config" | "queues">;
  /** Metering rates (budgets) of the installation. */
  quotas: QuotaConfig;
};

/** Every Berth job's processor. Add one line here when a job is added to server/queue/catalog.ts. */
export function registerBerthProcessors(
  registry: ProcessorRegistry<BerthJobCatalog>,
  deps: ProcessorDeps,
): void {
  registry.registerProcessor("audit.flush", auditFlushProcessor(deps));
  const engine = deps.engine ?? getEngine();
  const enqueue = createEnqueue(engine.queues);
  registry.registerProcessor(
    "metering.flush",
    meteringFlushProcessor({ ...deps, requestStop: (payload) => enqueue("workspace.stop", payload) }),
  );
  registerWorkspaceProcessors(registry, engine);
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
    id: "audit.flush.tick",
    job: "audit.flush",
    payload: { trigger: "schedule" },
    every: 10_000,
  }),
];

/** Per-queue concurrency: audit flushes are cheap and must not race each other for the buffer. */
export const berthConcurrencyByQueue = { audit: 1, metering: 1 } as const;
