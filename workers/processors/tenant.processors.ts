import type { Berth } from "@/server/composition/berth";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { deleteTenant } from "@/server/modules/operator/tenant-deletion.service";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { ProcessorRegistry } from "../registry";

/** `tenant.delete` (transport-thin: the service purges the workspaces through each record's driver). */
export function registerTenantProcessors(
  registry: ProcessorRegistry<BerthJobCatalog>,
  engine: Pick<WorkspaceEngine, "drivers" | "checkpoints">,
  /** The process' root (its database, read per job). */
  berth: Pick<Berth, "db" | "lifecycle">,
): void {
  registry.registerProcessor("tenant.delete", ({ payload, log }) =>
    deleteTenant(
      { drivers: engine.drivers, checkpoints: engine.checkpoints, lifecycle: berth.lifecycle },
      payload,
      log,
      berth.db,
    ),
  );
}
