import type {
  DriverCapabilities,
  DriverDefinition,
  DriverImplementation,
} from "@/server/workspace/drivers/driver";
import {
  deferredOperations,
  REQUIRED_OPERATIONS,
  WARM_POOL_OPERATIONS,
} from "@/server/workspace/drivers/deferred-operations";
import {
  kubernetesConfigFromEnv,
  ZKubernetesDriverConfig,
  type KubernetesDriverConfig,
} from "./kubernetes-config";

const KUBERNETES_CAPABILITIES: DriverCapabilities = {
  hostPaths: false,
  pauseKeepsMemory: false,
  gateway: "exec-stream",
  mayVanish: true,
  pty: true,
  previews: false,
  warmPool: true,
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
  create(config, context): DriverImplementation {
    return {
      persistent: true,
      isolation: { isolated: true, sandbox: config.runtimeClassName ?? null },
      capabilities: KUBERNETES_CAPABILITIES,
      ...deferredOperations(
        [...REQUIRED_OPERATIONS, "usage", "connectMcp", "probe", ...WARM_POOL_OPERATIONS],
        async () => (await import("./kubernetes-operations")).kubernetesOperations(config, context),
      ),
    };
  },
};
