import { AppError } from "@/server/shared/errors";
import type { DriverContext, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { DriverOperations } from "@/server/workspace/drivers/deferred-operations";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import type { E2bDriverConfig } from "./e2b-config";
import { E2bMachine } from "./e2b-machine";
import { E2bWarmPool } from "./e2b-pool";
import { E2bTeams } from "./e2b-teams";

/** The e2b driver's operations (driver.ts loads this module, and with it the SDK, on first use). */
export function e2bOperations(config: E2bDriverConfig, context: DriverContext): DriverOperations {
  const teams = new E2bTeams(config, context);
  // Each workspace's sandbox lives in its tenant's team (its own E2B key) or the installation's.
  const team = (spec: WorkspaceSpec) => teams.forSpec(spec);
  const pool = new E2bWarmPool(teams);
  return {
    // Workers: create (find, resume or create; verify; gateway), stop = pause, purge = kill, reconcile.
    create: async (spec, options) => (await team(spec)).create(spec, options?.onProgress),
    stop: async (spec) => (await team(spec)).stop(spec),
    purge: async (spec) => (await team(spec)).purge(spec),
    exists: async (spec) => (await team(spec)).exists(spec),
    // E2B's own sandbox metrics (CPU, memory, disk; no process count): E2bSandboxes.usage.
    usage: async (spec) => (await team(spec)).usage(spec),
    listResources: () => teams.listResources(),
    reap: (resource) => teams.reap(resource),
    // Warm pools (e2b-pool.ts): sandboxes of the installation's team, bound by a record, not by metadata.
    warmPoolKey: () => pool.key(),
    createIdleMachine: (id, options) => pool.createIdle(id, options?.onProgress),
    bindIdleMachine: (id, handle, spec) => pool.bind(id, handle, spec),
    discardIdleMachine: (id) => pool.discard(id),
    listIdleMachines: () => pool.listIdle(),
    // Every process: connect by the stored handle (resuming a sandbox E2B paused on its own) and reuse
    // the running gateway; never create a sandbox. Detaching only lets go of this process' connections.
    attach: async (spec, options) => {
      options?.signal?.throwIfAborted();
      return (await team(spec)).attach(spec);
    },
    isAlive: (machine) => (machine instanceof E2bMachine ? machine.isAlive() : Promise.resolve(false)),
    detach: (machine) => machine.close(),
    connectMcp: (machine) => Promise.resolve(e2bMachineOf(machine).gateway.connector),
  };
}

function e2bMachineOf(machine: WorkspaceMachine): E2bMachine {
  if (machine instanceof E2bMachine) return machine;
  throw new AppError("INTERNAL", "This machine was not attached by the E2B driver");
}
