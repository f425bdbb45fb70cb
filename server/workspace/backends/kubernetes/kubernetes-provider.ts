import { AppError } from "@/server/shared/errors";
import type { WorkspaceBackend } from "@/server/workspace/backend/port";
import type { BackendProvider, WorkspaceSpec } from "@/server/workspace/backend/driver";
import type { McpConnector } from "@/server/workspace/mcp/types";
import { KubernetesBackend } from "./kubernetes-backend";
import { attachGateway, type PodGateway } from "./kubernetes-gateway";
import { ownerOf, type KubernetesContext, type KubernetesMachineController } from "./kubernetes-machine";
import { podName } from "./kubernetes-names";
import { explainPod, podVerdict, verdictReason } from "./pod-lifecycle";
import { PodExecutor } from "./pod-exec";
import { POD } from "./workspace-manifests";

type Attached = { spec: WorkspaceSpec; gateway: PodGateway };

/**
 * How any Berth process (API replica or worker) attaches to a workspace Pod the workers provisioned: by
 * the name derived from the workspace id, so a restarted process finds the same Pod and claim. Attaching
 * reuses the running gateway (its credentials are a Secret of the Pod); closing a backend only drops this
 * process' tunnel. Stopping and purging are the machine controller's.
 */
export class KubernetesBackendProvider implements BackendProvider {
  readonly kind = "kubernetes" as const;
  readonly persistent = true;
  private readonly attached = new Map<KubernetesBackend, Attached>();

  constructor(
    private readonly context: KubernetesContext,
    private readonly machine: KubernetesMachineController,
  ) {}

  async provision(spec: WorkspaceSpec, options: { signal?: AbortSignal } = {}): Promise<WorkspaceBackend> {
    options.signal?.throwIfAborted();
    const { kube, config, bundle } = this.context;
    const owner = ownerOf(spec);
    const name = podName(owner);
    const pod = await kube.readOrNull("read the workspace Pod", () =>
      kube.core.readNamespacedPod({ namespace: kube.namespace, name }),
    );
    const verdict = pod ? podVerdict(pod) : null;
    if (!pod || verdict?.state !== "running") {
      const reason =
        pod && verdict ? await explainPod(kube, pod, verdictReason(verdict)) : "it does not exist";
      throw new AppError("UNAVAILABLE", `Workspace Pod ${kube.namespace}/${name} is not running: ${reason}`, {
        userMessage: "The workspace is not running",
        details: { pod: name },
      });
    }
    options.signal?.throwIfAborted();
    const gateway = await attachGateway(kube, config, owner, pod, bundle);
    const podUid = pod.metadata!.uid!;
    const backend: KubernetesBackend = new KubernetesBackend({
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
    this.attached.set(backend, { spec, gateway });
    return backend;
  }

  /** True while the Pod this backend attached to runs with every container up (evicted, deleted, replaced: false). */
  async isAlive(backend: WorkspaceBackend): Promise<boolean> {
    if (!(backend instanceof KubernetesBackend) || !this.attached.has(backend)) return false;
    const { kube } = this.context;
    try {
      const pod = await kube.readOrNull("read the workspace Pod", () =>
        kube.core.readNamespacedPod({ namespace: kube.namespace, name: backend.podName }),
      );
      return pod?.metadata?.uid === backend.podUid && podVerdict(pod).state === "running";
    } catch {
      return false;
    }
  }

  async teardown(backend: WorkspaceBackend, options: { purge: boolean }): Promise<void> {
    const attached = backend instanceof KubernetesBackend ? this.attached.get(backend) : undefined;
    await backend.close();
    if (!attached) return;
    if (options.purge) await this.machine.purge(attached.spec);
    else await this.machine.stop(attached.spec);
  }

  async detach(backend: WorkspaceBackend): Promise<void> {
    await backend.close();
  }

  createMcpConnector(backend: WorkspaceBackend): Promise<McpConnector> {
    const attached = backend instanceof KubernetesBackend ? this.attached.get(backend) : undefined;
    if (!attached) {
      return Promise.reject(
        new AppError("INTERNAL", "This backend was not attached by the Kubernetes provider"),
      );
    }
    return Promise.resolve(attached.gateway.connector);
  }

  /** Closes every tunnel this process holds (process shutdown). */
  async closeAll(): Promise<void> {
    await Promise.all([...this.attached.keys()].map((backend) => backend.close()));
  }
}
