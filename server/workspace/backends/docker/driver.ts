import path from "node:path";
import { z } from "zod";
import { definedOnly, parseEnv } from "@/server/shared/env-parsing";
import type { DriverDefinition, WorkspaceDriver } from "@/server/workspace/backend/driver";
import { ZDockerProviderConfig, type TDockerProviderConfig } from "./docker-config";
import { DockerMachineController } from "./docker-machine";

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
export const dockerDriver: DriverDefinition<TDockerProviderConfig> = {
  name: "docker",
  kind: "docker",
  summary: "one container per workspace on this host's Docker engine (no network by default)",
  configSchema: ZDockerProviderConfig,
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
  create(config, { installationId }): WorkspaceDriver {
    const machine = new DockerMachineController(config, installationId ? { installationId } : {});
    return {
      name: "docker",
      kind: "docker",
      capabilities: {
        isolated: true,
        persistent: true,
        hostPaths: false,
        pauseKeepsMemory: false,
        gateway: "unix-socket",
        mayVanish: true,
        pty: true,
      },
      isolation: { backend: "docker", isolated: true, sandbox: null },
      provider: machine.provider,
      machine,
      async probe() {
        try {
          await machine.workspaces.docker.ping();
          return { ok: true, summary: `Docker engine at ${config.socketPath}` };
        } catch (error) {
          return {
            ok: false,
            reason: `the Docker engine at ${config.socketPath} does not answer: ${String(error)}`,
            hint: "Start dockerd (`npm run docker:setup` installs and starts Debian's engine) or set DOCKER_SOCKET.",
          };
        }
      },
    };
  },
};
