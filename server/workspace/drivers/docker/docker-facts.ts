import { REQUIRED_OPERATIONS, WARM_POOL_OPERATIONS } from "@/server/workspace/drivers/deferred-operations";
import type { DriverImplementation } from "@/server/workspace/drivers/driver";

/** What the docker driver states about itself without loading dockerode (driver.ts, docker-operations.ts). */
export const DOCKER_FACTS = {
  persistent: true,
  isolation: { isolated: true, sandbox: null },
  capabilities: {
    hostPaths: false,
    pauseKeepsMemory: false,
    gateway: "unix-socket",
    mayVanish: true,
    pty: true,
    previews: true,
    warmPool: true,
  },
} as const satisfies Pick<DriverImplementation, "persistent" | "isolation" | "capabilities">;

/** The operations docker-operations.ts implements, optional ones included. */
export const DOCKER_OPERATIONS = [
  ...REQUIRED_OPERATIONS,
  "usage",
  "pruneImages",
  "connectMcp",
  "probe",
  ...WARM_POOL_OPERATIONS,
] as const;
