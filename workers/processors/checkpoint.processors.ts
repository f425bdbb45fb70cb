import type { Berth } from "@/server/composition/berth";
import { runCheckpointRestore } from "@/server/modules/checkpoint/checkpoint-restore.service";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { ProcessorRegistry } from "../registry";

/** `checkpoint.restore` (transport-thin): a revert's or fork's files, written under the restore's lease. */
export function registerCheckpointProcessors(
  registry: ProcessorRegistry<BerthJobCatalog>,
  berth: Pick<Berth, "engine" | "workspaces">,
): void {
  registry.registerProcessor("checkpoint.restore", ({ payload, log, job, signal }) =>
    runCheckpointRestore(
      { workspaces: berth.workspaces.service, store: berth.engine.checkpoints },
      payload,
      log,
      { isLastAttempt: job.attemptsMade + 1 >= (job.opts.attempts ?? 1), signal },
    ),
  );
}
