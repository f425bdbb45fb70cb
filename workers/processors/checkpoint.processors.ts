import type { Berth } from "@/server/composition/berth";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { runCheckpointRestore } from "@/server/modules/checkpoint/checkpoint-restore.service";
import { CHECKPOINT_PRUNE_EVERY_MS } from "@/server/modules/checkpoint/checkpoint.jobs";
import { pruneCheckpoints } from "@/server/modules/checkpoint/checkpoint-prune.service";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { BerthSchedulerId } from "@/server/queue/schedulers";
import type { ProcessorRegistry } from "../registry";
import { defineSchedule, type Schedule } from "../schedules";

/** `checkpoint.restore` (transport-thin): a revert's or fork's files, written under the restore's lease. */
export function registerCheckpointProcessors(
  registry: ProcessorRegistry<BerthJobCatalog>,
  engine: Pick<WorkspaceEngine, "checkpoints">,
  berth: Pick<Berth, "workspaces" | "db">,
): void {
  registry.registerProcessor("checkpoint.restore", ({ payload, log, job, signal }) =>
    runCheckpointRestore(
      { workspaces: berth.workspaces.service, store: engine.checkpoints, db: berth.db },
      payload,
      log,
      {
        isLastAttempt: job.attemptsMade + 1 >= (job.opts.attempts ?? 1),
        signal,
      },
    ),
  );
  registry.registerProcessor("checkpoint.prune", ({ log }) =>
    pruneCheckpoints({ store: engine.checkpoints, db: berth.db }, log),
  );
}

/** The checkpoint prune's tick (one run per interval across all workers). */
export const checkpointSchedules: readonly Schedule<BerthJobCatalog>[] = [
  defineSchedule<BerthJobCatalog, "checkpoint.prune">({
    id: "checkpoint.prune.tick" satisfies BerthSchedulerId,
    job: "checkpoint.prune",
    payload: { trigger: "schedule" },
    every: CHECKPOINT_PRUNE_EVERY_MS,
  }),
];
