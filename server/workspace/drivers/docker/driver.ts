import path from "node:path";
import { z } from "zod";
import { definedOnly, parseEnv } from "@/server/shared/env-parsing";
import type { DriverDefinition, DriverImplementation } from "@/server/workspace/drivers/driver";
import { ZDockerDriverConfig, type TDockerDriverConfig } from "./docker-config";
import { deferredOperations } from "@/server/workspace/drivers/deferred-operations";
import { DOCKER_FACTS, DOCKER_OPERATIONS } from "./docker-facts";

const ZDockerEnv = z.object({
  DOCKER_SOCKET: z.string().optional(),
  BERTH_DOCKER_BASE_IMAGE: z.string().optional(),
  // Workspace containers' network: "none" (default) cuts all egress.
  BERTH_DOCKER_NETWORK_MODE: z.string().optional(),
  // Host dir of the per-workspace gateway sockets; shared by API and workers (they attach through it).
  BERTH_DOCKER_RUNTIME_ROOT: z.string().optional(),
  BERTH_DOCKER_GATEWAY_BUNDLE: z.string().optional(),
  BERTH_DOCKER_CPUS: z.coerce.number().positive().optional(),
  BERTH_DOCKER_MEMORY_BYTES: z.coerce.number().int().positive().optional(),
  BERTH_DOCKER_PIDS_LIMIT: z.coerce.number().int().positive().optional(),
  // Unused workspace images of an earlier Berth or config are pruned by reconcile once this old.
  BERTH_DOCKER_IMAGE_GC_MIN_AGE_MS: z.coerce.number().int().min(0).optional(),
});

/**
 * `docker`: one container per workspace (network none, non-root, limits), its workdir a host folder under
 * the base dir bind-mounted at /workspace, MCP servers behind the in-container gateway (README.md here).
 */
export const dockerDriver: DriverDefinition<TDockerDriverConfig> = {
  name: "docker",
  kind: "docker",
  label: "docker",
  instructionsLabel: "Docker-based",
  summary: "one container per workspace on this host's Docker engine (no network by default)",
  configSchema: ZDockerDriverConfig,
  configFromEnv(env, { cwd, basedir }) {
    const vars = parseEnv(ZDockerEnv, env, "docker backend");
    const resolve = (value: string | undefined) => value && path.resolve(cwd, value);
    return definedOnly({
      dataRoot: basedir,
      socketPath: vars.DOCKER_SOCKET,
      baseImage: vars.BERTH_DOCKER_BASE_IMAGE,
      networkMode: vars.BERTH_DOCKER_NETWORK_MODE,
      runtimeRoot: resolve(vars.BERTH_DOCKER_RUNTIME_ROOT),
      gatewayBundlePath: resolve(vars.BERTH_DOCKER_GATEWAY_BUNDLE),
      cpus: vars.BERTH_DOCKER_CPUS,
      memoryBytes: vars.BERTH_DOCKER_MEMORY_BYTES,
      pidsLimit: vars.BERTH_DOCKER_PIDS_LIMIT,
      imageGcMinAgeMs: vars.BERTH_DOCKER_IMAGE_GC_MIN_AGE_MS,
    });
  },
  create(config, { installationId }): DriverImplementation {
    return {
      ...DOCKER_FACTS,
      ...deferredOperations(DOCKER_OPERATIONS, async () => {
        const [{ DockerMachines }, { dockerDriverOver }] = await Promise.all([
          import("./docker-machines"),
          import("./docker-operations"),
        ]);
        return dockerDriverOver(new DockerMachines(config, installationId ? { installationId } : {}));
      }),
    };
  },
};
