import type { DriverDefinition, DriverImplementation } from "@/server/workspace/drivers/driver";
import {
  deferredOperations,
  REQUIRED_OPERATIONS,
  WARM_POOL_OPERATIONS,
} from "@/server/workspace/drivers/deferred-operations";
import { e2bConfigFromEnv, ZE2bDriverConfig, ZE2bTenantSettings, type E2bDriverConfig } from "./e2b-config";

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
        warmPool: true,
      },
      ...deferredOperations(
        [...REQUIRED_OPERATIONS, ...WARM_POOL_OPERATIONS, "usage", "connectMcp"],
        async () => (await import("./e2b-operations")).e2bOperations(config, context),
      ),
    };
  },
};
