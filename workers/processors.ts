import type { Redis } from "ioredis";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { BerthSchedulerId } from "@/server/queue/schedulers";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { getEngine } from "@/server/composition/services";
import { auditFlushProcessor } from "./processors/audit.flush";
import { registerTenantProcessors } from "./processors/tenant.processors";
import { registerWorkspaceProcessors } from "./processors/workspace.processors";
import type { ProcessorRegistry } from "./registry";
import { defineSchedule, type Schedule } from "./schedules";

/** What Berth's processors need from the composition root (workers/runtime.ts). */
export type ProcessorDeps = {
  redis: Redis;
  redisPrefix: string;
  /** The process' workspace engine (drivers, config, queues); defaults to getEngine(). */
  engine?: Pick<WorkspaceEngine, "drivers" | "config" | "queues">;
};

/** Every Berth job's processor. Add one line here when a job is added to server/queue/catalog.ts. */
export function registerBerthProcessors(
  registry: ProcessorRegistry<BerthJobCatalog>,
  deps: ProcessorDeps,
): void {
  registry.registerProcessor("audit.flush", auditFlushProcessor(deps));
  const engine = deps.engine ?? getEngine();
  registerWorkspaceProcessors(registry, engine);
  registerTenantProcessors(registry, engine);
}

/** Repeating jobs. Each write also requests a flush; this tick only catches writes that raced a flush. */
export const berthSchedules: readonly Schedule<BerthJobCatalog>[] = [
  defineSchedule<BerthJobCatalog, "audit.flush">({
    id: "audit.flush.tick" satisfies BerthSchedulerId,
    job: "audit.flush",
    payload: { trigger: "schedule" },
    every: 10_000,
  }),
];

/** Per-queue concurrency: audit flushes are cheap and must not race each other for the buffer. */
export const berthConcurrencyByQueue = { audit: 1 } as const;
