import { AppError } from "@/server/shared/errors";
import type {
  DriverDefinition,
  DriverImplementation,
  WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { E2bMachine } from "./e2b-machine";
import { e2bConfigFromEnv, ZE2bDriverConfig, ZE2bTenantSettings, type E2bDriverConfig } from "./e2b-config";
import { E2bTeams } from "./e2b-teams";

/**
 * E2B cloud sandboxes (README.md in this folder): one sandbox per workspace through the official `e2b` SDK,
 * data kept across `stop` (a pause), the MCP gateway inside the sandbox behind its exposed port.
 */
export const e2bDriver: DriverDefinition<E2bDriverConfig> = {
  name: "e2b",
  kind: "e2b",
  label: "e2b",
  instructionsLabel: "E2B-based",
  summary:
    "E2B cloud sandboxes (official e2b SDK): one sandbox per workspace, paused on stop, resumed on use; needs E2B_API_KEY",
  tenantSettings: {
    schema: ZE2bTenantSettings,
    secretField: "apiKey",
    title: "E2B team",
    description:
      "Run this tenant's E2B workspaces in its own E2B team. Empty fields use the installation's; existing sandboxes stay in the team that made them.",
  },
  configSchema: ZE2bDriverConfig,
  configFromEnv: (env) => e2bConfigFromEnv(env),
  create(config, context): DriverImplementation {
    const teams = new E2bTeams(config, context);
    // Each workspace's sandbox lives in its tenant's team (its own E2B key) or the installation's.
    const team = (spec: WorkspaceSpec) => teams.forTenant(spec.tenantId);
    return {
      persistent: true,
      isolation: { isolated: true, sandbox: null },
      capabilities: {
        hostPaths: false,
        pauseKeepsMemory: config.pauseKeepsMemory,
        gateway: "sandbox-url",
        mayVanish: true,
        pty: true,
        previews: false,
      },
      // Workers: create (find, resume or create; verify; gateway), stop = pause, purge = kill, reconcile.
      create: async (spec, options) => (await team(spec)).create(spec, options?.onProgress),
      stop: async (spec) => (await team(spec)).stop(spec),
      purge: async (spec) => (await team(spec)).purge(spec),
      exists: async (spec) => (await team(spec)).exists(spec),
      // E2B's own sandbox metrics (CPU, memory, disk; no process count): E2bSandboxes.usage.
      usage: async (spec) => (await team(spec)).usage(spec),
      listResources: () => teams.listResources(),
      reap: (resource) => teams.reap(resource),
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
  },
};

function e2bMachineOf(machine: WorkspaceMachine): E2bMachine {
  if (machine instanceof E2bMachine) return machine;
  throw new AppError("INTERNAL", "This machine was not attached by the E2B driver");
}
