import type * as k8s from "@kubernetes/client-node";
import { AppError, isAppError } from "@/server/shared/errors";
import type {
  BackendHandle,
  CreateOptions,
  MachineResource,
  WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import type { InstallationIdSource } from "@/server/workspace/drivers/installation";
import type { MachineUsage } from "@/server/workspace/drivers/machine-usage";
import type { GatewayBundle } from "@/server/workspace/gateway/bundle-gateway";
import type { KubeClient } from "./kube-client";
import type { KubernetesDriverConfig } from "./kubernetes-config";
import { attachGateway } from "./kubernetes-gateway";
import {
  ANNOTATIONS,
  assertOwnObject,
  claimName,
  gatewaySecretName,
  installationSelector,
  LABELS,
  podName,
  specHash,
} from "./kubernetes-names";
import { deleteClaimAndWait, deletePodAndWait, ensureClaim, ensureRunningPod } from "./pod-lifecycle";
import { podUsage } from "./pod-usage";
import {
  claimLayoutOf,
  denyEgressPolicy,
  tenantEgressPolicy,
  type WorkspaceOwner,
} from "./workspace-manifests";

/** What the driver's parts share: one cluster connection, one config, one gateway bundle. */
export type KubernetesContext = {
  kube: KubeClient;
  config: KubernetesDriverConfig;
  bundle: () => Promise<GatewayBundle>;
  /** This installation's id: labelled on every Pod and claim; reconcile lists and reaps only those. */
  installationId: InstallationIdSource;
};

export function ownerOf(spec: WorkspaceSpec): WorkspaceOwner {
  return {
    tenantId: spec.tenantId,
    userId: spec.userId,
    workspaceId: spec.workspaceId,
    agentId: spec.agentId,
    ...(spec.resources ? { resources: spec.resources } : {}),
  };
}

/**
 * What the workers do to workspace Pods. Names derive from the workspace id, so every method is idempotent
 * and a job that runs again after a crash finds what the first run made. `stop` deletes the Pod and keeps
 * the claim; `purge` deletes both and waits until they are gone.
 */
export class KubernetesMachines {
  private readonly policiesInPlace = new Map<string, string>();

  constructor(private readonly context: KubernetesContext) {}

  async create(spec: WorkspaceSpec, options: CreateOptions = {}): Promise<BackendHandle> {
    const { kube, config, bundle } = this.context;
    const progress = options.onProgress ?? (() => undefined);
    const owner = { ...ownerOf(spec), installation: await this.context.installationId() };
    await this.ensurePolicies(spec.tenantId);
    const claim = await ensureClaim(kube, config, owner, progress);
    const pod = await ensureRunningPod(kube, config, owner, progress, claimLayoutOf(claim));
    const gateway = await attachGateway(kube, config, owner, pod, bundle, () =>
      progress({ step: "gateway.starting" }),
    );
    progress({ step: "gateway.ready" });
    // The worker only makes sure the gateway runs; processes that use it attach their own tunnel.
    await gateway.tunnel.close();
    return {
      kind: "kubernetes",
      namespace: kube.namespace,
      pod: podName(owner),
      claim: claimName(owner),
      podUid: pod.metadata?.uid ?? null,
    };
  }

  async stop(spec: WorkspaceSpec): Promise<void> {
    const { kube, config } = this.context;
    const owner = ownerOf(spec);
    await this.refuseForeign(owner);
    await deletePodAndWait(kube, podName(owner), config.terminationGracePeriodSeconds, config);
    await this.deleteSecret(owner);
  }

  async purge(spec: WorkspaceSpec): Promise<string[]> {
    const { kube, config } = this.context;
    const owner = ownerOf(spec);
    await this.refuseForeign(owner);
    const deletedPod = await deletePodAndWait(kube, podName(owner), 0, config);
    await this.deleteSecret(owner);
    const deletedClaim = await deleteClaimAndWait(kube, claimName(owner), config);
    return [
      ...(deletedPod ? [`pod:${kube.namespace}/${podName(owner)}`] : []),
      ...(deletedClaim ? [`persistentvolumeclaim:${kube.namespace}/${claimName(owner)}`] : []),
    ];
  }

  /** CPU and memory from the metrics API, disk and processes from an exec (pod-usage.ts); null without a running Pod. */
  usage(spec: WorkspaceSpec): Promise<MachineUsage | null> {
    return podUsage(this.context.kube, podName(ownerOf(spec)));
  }

  /** The claim is the workspace's data; a missing Pod is recreated from it by the next provision. */
  async exists(spec: WorkspaceSpec): Promise<boolean> {
    const { kube } = this.context;
    const owner = ownerOf(spec);
    const claim = await kube.readOrNull("read the workspace claim", () =>
      kube.core.readNamespacedPersistentVolumeClaim({ namespace: kube.namespace, name: claimName(owner) }),
    );
    if (claim) return true;
    const pod = await kube.readOrNull("read the workspace Pod", () =>
      kube.core.readNamespacedPod({ namespace: kube.namespace, name: podName(owner) }),
    );
    return pod !== null;
  }

  /**
   * One entry per workspace that has a Pod or a claim carrying Berth's labels AND this installation's id;
   * locator `<namespace>/<pod>`. Other installations' objects in the namespace are never listed, nor are
   * objects made before installations were labelled (their owner is unknown: none reaps them).
   */
  async listResources(): Promise<MachineResource[]> {
    const { kube } = this.context;
    const labelSelector = installationSelector(await this.context.installationId());
    const [pods, claims] = await Promise.all([
      kube.call("list workspace Pods", () =>
        kube.core.listNamespacedPod({ namespace: kube.namespace, labelSelector }),
      ),
      kube.call("list workspace claims", () =>
        kube.core.listNamespacedPersistentVolumeClaim({ namespace: kube.namespace, labelSelector }),
      ),
    ]);
    const byKey = new Map<string, MachineResource>();
    for (const object of [...claims.items, ...pods.items] as Array<{ metadata?: k8s.V1ObjectMeta }>) {
      const key = object.metadata?.labels?.[LABELS.key];
      if (!key || byKey.has(key)) continue;
      const annotations = object.metadata?.annotations ?? {};
      byKey.set(key, {
        workspaceId: annotations[ANNOTATIONS.workspace] ?? null,
        tenantId: annotations[ANNOTATIONS.tenant] ?? null,
        locator: `${kube.namespace}/berth-ws-${key}`,
      });
    }
    return [...byKey.values()];
  }

  /** Deletes an orphan's Pod, gateway Secret and claim, found by its key label (never anything unlabelled). */
  async reap(resource: MachineResource): Promise<void> {
    const { kube, config } = this.context;
    const match = /^([^/]+)\/berth-ws-([a-z0-9-]+)$/.exec(resource.locator);
    if (!match || match[1] !== kube.namespace) {
      throw new AppError(
        "BAD_REQUEST",
        `refusing to reap ${resource.locator}: not a workspace of namespace ${kube.namespace}`,
      );
    }
    // Only this installation's objects of that key (another installation's are never touched).
    const selector = `${installationSelector(await this.context.installationId())},${LABELS.key}=${match[2]}`;
    const namespace = kube.namespace;
    const pods = await kube.call("list workspace Pods", () =>
      kube.core.listNamespacedPod({ namespace, labelSelector: selector }),
    );
    for (const pod of pods.items) await deletePodAndWait(kube, pod.metadata!.name!, 0, config);
    const claims = await kube.call("list workspace claims", () =>
      kube.core.listNamespacedPersistentVolumeClaim({ namespace, labelSelector: selector }),
    );
    // The credentials Secret carries no installation label: it is touched only when the key's Pod or
    // claim is this installation's (a key of another installation's workspace keeps its credentials).
    if (pods.items.length === 0 && claims.items.length === 0) return;
    const secrets = await kube.call("list gateway credentials", () =>
      kube.core.listNamespacedSecret({ namespace, labelSelector: `${LABELS.key}=${match[2]}` }),
    );
    for (const secret of secrets.items) {
      await kube.deleteIfPresent("delete gateway credentials", () =>
        kube.core.deleteNamespacedSecret({ namespace, name: secret.metadata!.name! }),
      );
    }
    for (const claim of claims.items) await deleteClaimAndWait(kube, claim.metadata!.name!, config);
  }

  /**
   * CONFLICT when the Pod or claim under this workspace's names carries another installation's id: stop
   * and purge never delete what another installation made (provision refuses it the same way).
   */
  private async refuseForeign(owner: WorkspaceOwner) {
    const { kube } = this.context;
    const installation = await this.context.installationId();
    const [pod, claim] = await Promise.all([
      kube.readOrNull("read the workspace Pod", () =>
        kube.core.readNamespacedPod({ namespace: kube.namespace, name: podName(owner) }),
      ),
      kube.readOrNull("read the workspace claim", () =>
        kube.core.readNamespacedPersistentVolumeClaim({ namespace: kube.namespace, name: claimName(owner) }),
      ),
    ]);
    for (const object of [pod, claim]) if (object) assertOwnObject(object, installation);
  }

  private async deleteSecret(owner: WorkspaceOwner) {
    const { kube } = this.context;
    await kube.deleteIfPresent("delete the gateway credentials", () =>
      kube.core.deleteNamespacedSecret({ namespace: kube.namespace, name: gatewaySecretName(owner) }),
    );
  }

  /** The deny-egress policy, and the tenant's egress policy when configured; checked once per process. */
  private async ensurePolicies(tenantId: string) {
    const { config } = this.context;
    if (config.networkPolicy === "none") return;
    await this.ensurePolicy(denyEgressPolicy());
    const rules = config.tenantEgress[tenantId];
    if (rules && rules.length > 0) await this.ensurePolicy(tenantEgressPolicy(tenantId, rules));
  }

  /**
   * Create-or-update by a hash annotation of the spec we want (the server's copy of a spec carries
   * defaults, so comparing specs would always differ); concurrent writers conflict, re-read and settle.
   */
  private async ensurePolicy(policy: k8s.V1NetworkPolicy) {
    const { kube } = this.context;
    const name = policy.metadata!.name!;
    const hash = specHash(policy.spec);
    if (this.policiesInPlace.get(name) === hash) return;
    const namespace = kube.namespace;
    const body = {
      ...policy,
      metadata: {
        ...policy.metadata,
        annotations: { ...policy.metadata?.annotations, [ANNOTATIONS.specHash]: hash },
      },
    };
    for (let attempt = 0; ; attempt++) {
      const existing = await kube.readOrNull("read a NetworkPolicy", () =>
        kube.networking.readNamespacedNetworkPolicy({ namespace, name }),
      );
      if (existing?.metadata?.annotations?.[ANNOTATIONS.specHash] === hash) break;
      try {
        if (!existing) {
          await kube.call("create the workspaces' NetworkPolicy", () =>
            kube.networking.createNamespacedNetworkPolicy({ namespace, body }),
          );
        } else {
          await kube.call("update the workspaces' NetworkPolicy", () =>
            kube.networking.replaceNamespacedNetworkPolicy({
              namespace,
              name,
              body: {
                ...body,
                metadata: { ...body.metadata, resourceVersion: existing.metadata?.resourceVersion },
              },
            }),
          );
        }
        break;
      } catch (error) {
        if (!(isAppError(error) && error.code === "CONFLICT") || attempt >= 3) throw error;
      }
    }
    this.policiesInPlace.set(name, hash);
  }
}
