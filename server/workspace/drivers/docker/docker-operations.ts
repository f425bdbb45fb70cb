import type { DriverImplementation } from "@/server/workspace/drivers/driver";
import { DOCKER_FACTS } from "./docker-facts";
import type { DockerMachines } from "./docker-machines";

/**
 * The docker driver's facts and operations over one DockerMachines (what `create` builds; tests hand in
 * theirs to reach its attacher's handles).
 */
export function dockerDriverOver(machines: DockerMachines): DriverImplementation {
  const { attacher } = machines;
  const { socketPath } = machines.workspaces.config;
  return {
    ...DOCKER_FACTS,
    create: (spec, options) => machines.create(spec, options),
    stop: (spec) => machines.stop(spec),
    purge: (spec) => machines.purge(spec),
    exists: (spec) => machines.exists(spec),
    listResources: () => machines.listResources(),
    reap: (resource) => machines.reap(resource),
    usage: (spec) => machines.usage(spec),
    pruneImages: (options) => machines.pruneImages(options),
    warmPoolKey: () => machines.warmPool.key(),
    createIdleMachine: (id, options) => machines.createIdleMachine(id, options),
    bindIdleMachine: (id, handle, spec) => machines.bindIdleMachine(id, handle, spec),
    discardIdleMachine: (id) => machines.warmPool.discard(id),
    listIdleMachines: () => machines.warmPool.listIdle(),
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
