import path from "node:path";
import { z } from "zod";
import { definedOnly, parseEnv } from "@/server/shared/env-parsing";
import type { DriverDefinition, DriverImplementation } from "@/server/workspace/drivers/driver";
import { ZDockerDriverConfig, type TDockerDriverConfig } from "./docker-config";
import { DockerMachines } from "./docker-machines";

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
    return dockerDriverOver(new DockerMachines(config, installationId ? { installationId } : {}));
  },
};

/**
 * The docker driver's facts and operations over one DockerMachines (what `create` builds; tests hand in
 * theirs to reach its attacher's handles).
 */
export function dockerDriverOver(machines: DockerMachines): DriverImplementation {
  const { attacher } = machines;
  const { socketPath } = machines.workspaces.config;
  return {
    persistent: true,
    isolation: { isolated: true, sandbox: null },
    capabilities: {
      hostPaths: false,
      pauseKeepsMemory: false,
      gateway: "unix-socket",
      mayVanish: true,
      pty: true,
      previews: true,
    },
    create: (spec, options) => machines.create(spec, options),
    stop: (spec) => machines.stop(spec),
    purge: (spec) => machines.purge(spec),
    exists: (spec) => machines.exists(spec),
    listResources: () => machines.listResources(),
    reap: (resource) => machines.reap(resource),
    usage: (spec) => machines.usage(spec),
    pruneImages: (options) => machines.pruneImages(options),
    attach: (spec, options) => attacher.attach(spec, options),
    isAlive: (machine) => attacher.isAlive(machine),
    detach: () => attacher.detach(),
    connectMcp: (machine) => attacher.connectMcp(machine),
    async probe() {
      try {
        await machines.workspaces.docker.ping();
        return { ok: true, summary: `Docker engine at ${socketPath}` };
      } catch (error) {
        return {
          ok: false,
          reason: `the Docker engine at ${socketPath} does not answer: ${String(error)}`,
          hint: "Start dockerd (`npm run docker:setup` installs and starts Debian's engine) or set DOCKER_SOCKET.",
        };
      }
    },
  };
}
