import type { Berth } from "@/server/composition/berth";
import type { WorkspaceEngine } from "@/server/engine/engine";
import {
  provisionWorkspace,
  stopWorkspace,
  type WorkspaceJobDeps,
} from "@/server/modules/machines/machine-jobs.service";
import { sweepIdleWorkspaces } from "@/server/modules/machines/idle-sweep.service";
import { purgeWorkspace } from "@/server/modules/purge/workspace-purge.service";
import { reconcileWorkspaces } from "@/server/modules/machines/reconcile.service";
import { purgeAgent, purgeSessions } from "@/server/modules/purge/workspace-scope-purge.service";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { BerthSchedulerId } from "@/server/queue/schedulers";
import { createEnqueue } from "@/server/queue/enqueue";
import type { ProcessorRegistry } from "../registry";
import { defineSchedule, type Schedule } from "../schedules";

/**
 * Processors of the workspace jobs (transport-thin: payload in, one service call, result out). The
 * record's backend driver does the machine work; the registry maps AppErrors to retry or not.
 */
export function registerWorkspaceProcessors(
  registry: ProcessorRegistry<BerthJobCatalog>,
  engine: Pick<WorkspaceEngine, "drivers" | "config" | "queues" | "checkpoints">,
  /** The process' root (its database, read per job). */
  berth: Pick<Berth, "db" | "quota" | "usage" | "stageSamples" | "lifecycle">,
  /** The workers' job lock duration: a provision run's claim lapses after as long (provision-claim.ts). */
  options: { lockDurationMs?: number | undefined } = {},
): void {
  const enqueue = createEnqueue(engine.queues);
  const deps: WorkspaceJobDeps = {
    drivers: engine.drivers,
    config: engine.config,
    get db() {
      return berth.db;
    },
    quota: () => berth.quota,
    usage: () => berth.usage,
    stageSamples: () => berth.stageSamples,
    get lifecycle() {
      return berth.lifecycle;
    },
    requestStop: (payload) => enqueue("workspace.stop", payload),
    requestProvision: (payload) => enqueue("workspace.provision", payload),
    requestPoolRefill: () => enqueue("pool.refill", { trigger: "claim" }),
    checkpoints: engine.checkpoints,
    ...(options.lockDurationMs !== undefined ? { provisionClaimMs: options.lockDurationMs } : {}),
  };
  registry
    .registerProcessor("workspace.provision", ({ payload, log, job, signal }) =>
      provisionWorkspace(
        deps,
        payload,
        log,
        { requestedAt: job.timestamp, pickedUpAt: job.processedOn ?? Date.now() },
        signal,
      ),
    )
    .registerProcessor("workspace.stop", ({ payload }) => stopWorkspace(deps, payload))
    // Long on a big folder: it stops at the signal (shutdown, lost lock) and the next worker resumes it.
    .registerProcessor("workspace.purge", ({ payload, job, signal }) =>
      purgeWorkspace(deps, payload, {
        signal,
        onProgress: (deleted) => job.updateProgress({ deleted }),
      }),
    )
    .registerProcessor("workspace.sweep", ({ log }) => sweepIdleWorkspaces(deps, log))
    .registerProcessor("workspace.reconcile", ({ payload, log, signal }) =>
      reconcileWorkspaces(deps, payload, log, { signal }),
    )
    .registerProcessor("session.purge", ({ payload, log }) => purgeSessions(deps, payload, log))
    .registerProcessor("agent.purge", ({ payload }) => purgeAgent(deps, payload));
}

/** The sweeper and the reconciler, as BullMQ job schedulers (one tick per interval across all workers). */
export function workspaceSchedules(
  config: Pick<WorkspaceEngine["config"], "sweepIntervalMs" | "reconcileIntervalMs">,
): Schedule<BerthJobCatalog>[] {
  return [
    defineSchedule<BerthJobCatalog, "workspace.sweep">({
      id: "workspace.sweep.tick" satisfies BerthSchedulerId,
      job: "workspace.sweep",
      payload: { trigger: "schedule" },
      every: config.sweepIntervalMs,
    }),
    defineSchedule<BerthJobCatalog, "workspace.reconcile">({
      id: "workspace.reconcile.tick" satisfies BerthSchedulerId,
      job: "workspace.reconcile",
      payload: { trigger: "schedule", dryRun: false },
      every: config.reconcileIntervalMs,
    }),
  ];
}
