import type { DriverDefinition, WorkspaceDriver } from "@/server/workspace/backend/driver";
import { e2bConfigFromEnv, ZE2bDriverConfig, type E2bDriverConfig } from "./e2b-config";
import { E2bBackendProvider, E2bMachineController } from "./e2b-provider";
import { E2bTeams } from "./e2b-teams";

/**
 * E2B cloud sandboxes (README.md in this folder): one sandbox per workspace through the official `e2b` SDK,
 * data kept across `stop` (a pause), the MCP gateway inside the sandbox behind its exposed port.
 */
export const e2bDriver: DriverDefinition<E2bDriverConfig> = {
  name: "e2b",
  kind: "e2b",
  summary:
    "E2B cloud sandboxes (official e2b SDK): one sandbox per workspace, paused on stop, resumed on use; needs E2B_API_KEY",
  configSchema: ZE2bDriverConfig,
  configFromEnv: (env) => e2bConfigFromEnv(env),
  create(config, context): WorkspaceDriver {
    const teams = new E2bTeams(config, context);
    return {
      name: "e2b",
      kind: "e2b",
      capabilities: {
        isolated: true,
        persistent: true,
        hostPaths: false,
        pauseKeepsMemory: config.pauseKeepsMemory,
        gateway: "sandbox-url",
        mayVanish: true,
        pty: true,
      },
      isolation: { backend: "e2b", isolated: true, sandbox: null },
      provider: new E2bBackendProvider(teams),
      machine: new E2bMachineController(teams),
    };
  },
};
