import { installationIdOf } from "@/server/workspace/drivers/installation";
import type {
  DriverCapabilities,
  DriverDefinition,
  DriverImplementation,
} from "@/server/workspace/drivers/driver";
import { loadGatewayBundle, readGatewayBundle } from "@/server/workspace/gateway/bundle-gateway";
import { KubeClient } from "./kube-client";
import {
  kubernetesConfigFromEnv,
  ZKubernetesDriverConfig,
  type KubernetesDriverConfig,
} from "./kubernetes-config";
import { KubernetesMachines, type KubernetesContext } from "./kubernetes-machines";
import { KubernetesAttacher } from "./kubernetes-attacher";

const KUBERNETES_CAPABILITIES: DriverCapabilities = {
  hostPaths: false,
  pauseKeepsMemory: false,
  gateway: "exec-stream",
  mayVanish: true,
  pty: true,
  previews: false,
};

/**
 * Workspaces as Pods of a Kubernetes cluster (one Pod and one PersistentVolumeClaim per workspace, names
 * derived from the workspace id), through `@kubernetes/client-node`. See README.md in this folder.
 */
export const kubernetesDriver: DriverDefinition<KubernetesDriverConfig> = {
  name: "kubernetes",
  kind: "kubernetes",
  label: "kubernetes",
  instructionsLabel: "Kubernetes-based",
  summary:
    "One Pod and one PersistentVolumeClaim per workspace on a Kubernetes cluster (kubeconfig or in-cluster); for installations whose workspaces outgrow one host.",
  configSchema: ZKubernetesDriverConfig,
  configFromEnv: kubernetesConfigFromEnv,
  create(config, { installationId }): DriverImplementation {
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
    return {
      persistent: true,
      isolation: { isolated: true, sandbox: config.runtimeClassName ?? null },
      capabilities: KUBERNETES_CAPABILITIES,
      create: (spec, options) => machines.create(spec, options),
      stop: (spec) => machines.stop(spec),
      purge: (spec) => machines.purge(spec),
      exists: (spec) => machines.exists(spec),
      listResources: () => machines.listResources(),
      reap: (resource) => machines.reap(resource),
      usage: (spec) => machines.usage(spec),
      attach: (spec, options) => attacher.attach(spec, options),
      isAlive: (machine) => attacher.isAlive(machine),
      // Drops this process' exec tunnel only; the Pod runs on for every other process.
      detach: (machine) => machine.close(),
      connectMcp: (machine) => attacher.connectMcp(machine),
      close: () => attacher.closeAll(),
    };
  },
};
