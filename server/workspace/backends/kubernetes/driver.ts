import { installationIdOf } from "@/server/workspace/backend/installation";
import type {
  DriverCapabilities,
  DriverDefinition,
  WorkspaceDriver,
} from "@/server/workspace/backend/driver";
import { loadGatewayBundle, readGatewayBundle } from "@/server/workspace/gateway/bundle-gateway";
import { KubeClient } from "./kube-client";
import {
  kubernetesConfigFromEnv,
  ZKubernetesDriverConfig,
  type KubernetesDriverConfig,
} from "./kubernetes-config";
import { KubernetesMachineController, type KubernetesContext } from "./kubernetes-machine";
import { KubernetesBackendProvider } from "./kubernetes-provider";

const KUBERNETES_CAPABILITIES: DriverCapabilities = {
  isolated: true,
  persistent: true,
  hostPaths: false,
  pauseKeepsMemory: false,
  gateway: "exec-stream",
  mayVanish: true,
  pty: true,
};

/**
 * Workspaces as Pods of a Kubernetes cluster (one Pod and one PersistentVolumeClaim per workspace, names
 * derived from the workspace id), through `@kubernetes/client-node`. See README.md in this folder.
 */
export const kubernetesDriver: DriverDefinition<KubernetesDriverConfig> = {
  name: "kubernetes",
  kind: "kubernetes",
  summary:
    "One Pod and one PersistentVolumeClaim per workspace on a Kubernetes cluster (kubeconfig or in-cluster); for installations whose workspaces outgrow one host.",
  configSchema: ZKubernetesDriverConfig,
  configFromEnv: kubernetesConfigFromEnv,
  create(config, { installationId }): WorkspaceDriver {
    const kube = new KubeClient(config);
    const prebuilt = config.gatewayBundlePath;
    const context: KubernetesContext = {
      kube,
      config,
      bundle: prebuilt ? () => readGatewayBundle(prebuilt) : () => loadGatewayBundle(),
      installationId: installationIdOf(installationId),
    };
    const machine = new KubernetesMachineController(context);
    const provider = new KubernetesBackendProvider(context, machine);
    return {
      name: "kubernetes",
      kind: "kubernetes",
      capabilities: KUBERNETES_CAPABILITIES,
      isolation: { backend: "kubernetes", isolated: true, sandbox: config.runtimeClassName ?? null },
      provider,
      machine,
      close: () => provider.closeAll(),
    };
  },
};
