import { installationIdOf } from "@/server/workspace/drivers/installation";
import type { DriverContext } from "@/server/workspace/drivers/driver";
import type { DriverOperations } from "@/server/workspace/drivers/deferred-operations";
import { loadGatewayBundle, readGatewayBundle } from "@/server/workspace/gateway/bundle-gateway";
import { KubeClient } from "./kube-client";
import type { KubernetesDriverConfig } from "./kubernetes-config";
import { KubernetesMachines, type KubernetesContext } from "./kubernetes-machines";
import { KubernetesAttacher } from "./kubernetes-attacher";
import { KubernetesWarmPool } from "./kubernetes-pool";

/** The kubernetes driver's operations (driver.ts loads this module, and with it the client, on first use). */
export function kubernetesOperations(
  config: KubernetesDriverConfig,
  { installationId }: DriverContext,
): DriverOperations {
  const kube = new KubeClient(config);
  const prebuilt = config.gatewayBundlePath;
  const context: KubernetesContext = {
    kube,
    config,
    bundle: prebuilt ? () => readGatewayBundle(prebuilt) : () => loadGatewayBundle(),
    installationId: installationIdOf(installationId),
  };
  const machines = new KubernetesMachines(context);
  const attacher = new KubernetesAttacher(context);
  const pool = new KubernetesWarmPool(context, machines);
  return {
    create: (spec, options) => machines.create(spec, options),
    stop: (spec) => machines.stop(spec),
    purge: (spec) => machines.purge(spec),
    exists: (spec) => machines.exists(spec),
    listResources: () => machines.listResources(),
    reap: (resource) => machines.reap(resource),
    usage: (spec) => machines.usage(spec),
    warmPoolKey: () => pool.key(),
    createIdleMachine: (id, options) => pool.createIdleMachine(id, options),
    bindIdleMachine: (id, handle, spec) => pool.bind(id, handle, spec),
    discardIdleMachine: (id) => pool.discard(id),
    listIdleMachines: () => pool.listIdle(),
    attach: (spec, options) => attacher.attach(spec, options),
    isAlive: (machine) => attacher.isAlive(machine),
    // Drops this process' exec tunnel only; the Pod runs on for every other process.
    detach: (machine) => machine.close(),
    connectMcp: (machine) => attacher.connectMcp(machine),
    // Building the client above read the kubeconfig: a bad one threw, which `npm start`'s boot check reports.
    probe: () =>
      Promise.resolve({ ok: true, summary: `Kubernetes API ${kube.server}, namespace ${kube.namespace}` }),
    close: () => attacher.closeAll(),
  };
}
