import { AppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import type { AttachOptions, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { McpConnector } from "@/server/workspace/mcp/types";
import { KubernetesMachine } from "./kubernetes-machine";
import { attachGateway, credentialsStoreOf, type PodGateway } from "./kubernetes-gateway";
import type { KubernetesContext } from "./kubernetes-machines";
import { workspaceKey } from "./kubernetes-names";
import { isBoundTo, machineNamesOf } from "./pool-identity";
import { explainPod, podVerdict, verdictReason } from "./pod-lifecycle";
import { PodExecutor } from "./pod-exec";
import { POD } from "./workspace-manifests";

type Attached = { gateway: PodGateway };

/**
 * How any Berth process (API replica or worker) attaches to a workspace Pod the workers provisioned: by
 * the name derived from the workspace id, or the pool machine's its stored handle names (pool-identity.ts),
 * so a restarted process finds the same Pod and claim. Attaching
 * reuses the running gateway (its credentials are a Secret of the Pod); closing a backend only drops this
 * process' tunnel. Stopping and purging are the workers' (KubernetesMachines).
 */
export class KubernetesAttacher {
  private readonly attached = new Map<KubernetesMachine, Attached>();

  constructor(private readonly context: KubernetesContext) {}

  async attach(spec: WorkspaceSpec, options: AttachOptions = {}): Promise<WorkspaceMachine> {
    options.signal?.throwIfAborted();
    const { kube, config, bundle } = this.context;
    const names = machineNamesOf(spec);
    const name = names.pod;
    const found = await kube.readOrNull("read the workspace Pod", () =>
      kube.core.readNamespacedPod({ namespace: kube.namespace, name }),
    );
    // A pool machine is this workspace's only while bound to it (a stale or foreign handle finds nothing).
    const pod = found && (names.pool === null || isBoundTo(found, spec)) ? found : null;
    const verdict = pod ? podVerdict(pod) : null;
    if (!pod || verdict?.state !== "running") {
      const reason =
        pod && verdict
          ? await explainPod(kube, pod, verdictReason(verdict))
          : found
            ? "it is not bound to this workspace"
            : "it does not exist";
      throw new AppError("UNAVAILABLE", `Workspace Pod ${kube.namespace}/${name} is not running: ${reason}`, {
        userMessage: "The workspace is not running",
        details: { pod: name },
      });
    }
    options.signal?.throwIfAborted();
    const store = credentialsStoreOf(names, workspaceKey(spec));
    const gateway = await attachGateway(kube, config, store, pod, bundle);
    const podUid = pod.metadata!.uid!;
    const backend: KubernetesMachine = new KubernetesMachine({
      executor: new PodExecutor(kube, { namespace: kube.namespace, pod: name, container: POD.workspace }),
      podUid,
      onUnkillable: async () => {
        // A command holds every pid and no killer can run: give the Pod up (the claim keeps the data).
        await kube.deleteIfPresent("delete an unresponsive workspace Pod", () =>
          kube.core.deleteNamespacedPod({ namespace: kube.namespace, name, gracePeriodSeconds: 0 }),
        );
      },
      onClose: async () => {
        this.attached.delete(backend);
        await gateway.tunnel.close();
      },
    });
    this.attached.set(backend, { gateway });
    return backend;
  }

  /** True while the Pod this backend attached to runs with every container up (evicted, deleted, replaced: false). */
  async isAlive(machine: WorkspaceMachine): Promise<boolean> {
    if (!(machine instanceof KubernetesMachine) || !this.attached.has(machine)) return false;
    const { kube } = this.context;
    try {
      const pod = await kube.readOrNull("read the workspace Pod", () =>
        kube.core.readNamespacedPod({ namespace: kube.namespace, name: machine.podName }),
      );
      return pod?.metadata?.uid === machine.podUid && podVerdict(pod).state === "running";
    } catch {
      return false;
    }
  }

  connectMcp(machine: WorkspaceMachine): Promise<McpConnector> {
    const attached = machine instanceof KubernetesMachine ? this.attached.get(machine) : undefined;
    if (!attached) {
      return Promise.reject(
        new AppError("INTERNAL", "This machine was not attached by the Kubernetes driver"),
      );
    }
    return Promise.resolve(attached.gateway.connector);
  }

  /** Closes every tunnel this process holds (process shutdown). */
  async closeAll(): Promise<void> {
    await Promise.all([...this.attached.keys()].map((backend) => backend.close()));
  }
}
