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
import { attachGateway, credentialsStoreOf } from "./kubernetes-gateway";
import {
  ANNOTATIONS,
  assertOwnObject,
  installationSelector,
  isPoolId,
  LABELS,
  poolNames,
  specHash,
  workspaceKey,
  workspaceNames,
  type MachineNames,
} from "./kubernetes-names";
import { deleteClaimAndWait, deletePodAndWait, ensureClaim, ensureRunningPod } from "./pod-lifecycle";
import { podUsage } from "./pod-usage";
import {
  boundIdentity,
  isBoundTo,
  machineHandle,
  machineNamesOf,
  pooledIdOf,
  poolStateOf,
} from "./pool-identity";
import {
  claimLayoutOf,
  identityOf,
  type MachineIdentity,
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
    // A bound pool machine keeps its names for life: its Pod is remade on its own claim after a stop. One
    // whose claim is gone leaves the workspace its own Pod and claim, as a first create would make.
    const machine = (await this.boundMachineOf(spec, owner)) ?? identityOf(owner);
    const claim = await ensureClaim(kube, config, machine, progress);
    const pod = await ensureRunningPod(kube, config, machine, progress, claimLayoutOf(claim));
    const store = credentialsStoreOf(machine.names, workspaceKey(owner));
    const gateway = await attachGateway(kube, config, store, pod, bundle, () =>
      progress({ step: "gateway.starting" }),
    );
    progress({ step: "gateway.ready" });
    // The worker only makes sure the gateway runs; processes that use it attach their own tunnel.
    await gateway.tunnel.close();
    return machineHandle(kube.namespace, machine.names, pod.metadata?.uid ?? null);
  }

  async stop(spec: WorkspaceSpec): Promise<void> {
    const { kube, config } = this.context;
    const names = machineNamesOf(spec);
    await this.refuseForeign(ownerOf(spec), names);
    await deletePodAndWait(kube, names.pod, config.terminationGracePeriodSeconds, config);
    await this.deleteSecret(names);
  }

  /**
   * Deletes what the stored handle names, the workspace's own names, and every pool machine bound to the
   * workspace (a provision that died between the bind and storing its handle left one labelled so).
   */
  async purge(spec: WorkspaceSpec): Promise<string[]> {
    const { kube, config } = this.context;
    const owner = ownerOf(spec);
    const candidates = new Map<string, MachineNames>();
    for (const names of [
      machineNamesOf(spec),
      workspaceNames(owner),
      ...(await this.boundPoolMachines(owner)),
    ])
      candidates.set(names.pod, names);
    for (const names of candidates.values()) await this.refuseForeign(owner, names);
    const deleted: string[] = [];
    for (const names of candidates.values()) {
      if (await deletePodAndWait(kube, names.pod, 0, config))
        deleted.push(`pod:${kube.namespace}/${names.pod}`);
      await this.deleteSecret(names);
      if (await deleteClaimAndWait(kube, names.claim, config))
        deleted.push(`persistentvolumeclaim:${kube.namespace}/${names.claim}`);
    }
    return deleted;
  }

  /** CPU and memory from the metrics API, disk and processes from an exec (pod-usage.ts); null without a running Pod. */
  usage(spec: WorkspaceSpec): Promise<MachineUsage | null> {
    return podUsage(this.context.kube, machineNamesOf(spec).pod);
  }

  /** The claim is the workspace's data; a missing Pod is recreated from it by the next provision. */
  async exists(spec: WorkspaceSpec): Promise<boolean> {
    const { kube } = this.context;
    const names = machineNamesOf(spec);
    // A pool machine counts only while it is bound to this workspace.
    const ours = (object: { metadata?: k8s.V1ObjectMeta } | null) =>
      object !== null && (names.pool === null || isBoundTo(object, spec));
    const claim = await kube.readOrNull("read the workspace claim", () =>
      kube.core.readNamespacedPersistentVolumeClaim({ namespace: kube.namespace, name: names.claim }),
    );
    if (ours(claim)) return true;
    const pod = await kube.readOrNull("read the workspace Pod", () =>
      kube.core.readNamespacedPod({ namespace: kube.namespace, name: names.pod }),
    );
    return ours(pod);
  }

  /**
   * One entry per workspace that has a Pod or a claim carrying Berth's labels AND this installation's id
   * AND a workspace key (an idle pool machine has none: `listIdleMachines` lists it); locator
   * `<namespace>/<pod>` (`berth-ws-<key>`, or `berth-pool-<id>` for a bound pool machine). Other
   * installations' objects in the namespace are never listed, nor are objects made before installations
   * were labelled (their owner is unknown: none reaps them).
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
      const pool = annotations[ANNOTATIONS.poolId];
      byKey.set(key, {
        workspaceId: annotations[ANNOTATIONS.workspace] ?? null,
        tenantId: annotations[ANNOTATIONS.tenant] ?? null,
        locator: `${kube.namespace}/${isPoolId(pool) ? poolNames(pool).pod : `berth-ws-${key}`}`,
      });
    }
    return [...byKey.values()];
  }

  /**
   * Deletes an orphan's Pods, gateway Secrets and claims, found by its workspace key label (never anything
   * unlabelled). A `berth-pool-<id>` locator leads to the key its bound machine carries; an unbound pool
   * machine is refused (it is nobody's: `discardIdleMachine` deletes it).
   */
  async reap(resource: MachineResource): Promise<void> {
    const { kube, config } = this.context;
    const match = /^([^/]+)\/(berth-(?:ws|pool)-[A-Za-z0-9-]+)$/.exec(resource.locator);
    if (!match || match[1] !== kube.namespace) {
      throw new AppError(
        "BAD_REQUEST",
        `refusing to reap ${resource.locator}: not a workspace of namespace ${kube.namespace}`,
      );
    }
    const installation = await this.context.installationId();
    const key = match[2]!.startsWith("berth-ws-")
      ? match[2]!.slice("berth-ws-".length)
      : await this.keyOfPoolMachine(match[2]!, installation);
    if (!key) {
      throw new AppError("BAD_REQUEST", `refusing to reap ${resource.locator}: not bound to a workspace`);
    }
    // Only this installation's objects of that key (another installation's are never touched).
    const selector = `${installationSelector(installation)},${LABELS.key}=${key}`;
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
      kube.core.listNamespacedSecret({ namespace, labelSelector: `${LABELS.key}=${key}` }),
    );
    for (const secret of secrets.items) {
      await kube.deleteIfPresent("delete gateway credentials", () =>
        kube.core.deleteNamespacedSecret({ namespace, name: secret.metadata!.name! }),
      );
    }
    for (const claim of claims.items) await deleteClaimAndWait(kube, claim.metadata!.name!, config);
  }

  /** The workspace key a bound pool machine of this installation carries (claim or Pod), else null. */
  private async keyOfPoolMachine(pod: string, installation: string): Promise<string | null> {
    const { kube } = this.context;
    const [claim, running] = await Promise.all([
      kube.readOrNull("read the workspace claim", () =>
        kube.core.readNamespacedPersistentVolumeClaim({ namespace: kube.namespace, name: `${pod}-data` }),
      ),
      kube.readOrNull("read the workspace Pod", () =>
        kube.core.readNamespacedPod({ namespace: kube.namespace, name: pod }),
      ),
    ]);
    for (const object of [claim, running]) {
      const key = object?.metadata?.labels?.[LABELS.key];
      const own = object?.metadata?.labels?.[LABELS.installation] === installation;
      if (object && own && key && poolStateOf(object) === "bound") return key;
    }
    return null;
  }

  /** The pool machines of this installation bound to the workspace (by its key label). */
  private async boundPoolMachines(owner: WorkspaceOwner): Promise<MachineNames[]> {
    const { kube } = this.context;
    const labelSelector = `${installationSelector(await this.context.installationId())},${LABELS.key}=${workspaceKey(owner)},${LABELS.pool}`;
    const [pods, claims] = await Promise.all([
      kube.call("list workspace Pods", () =>
        kube.core.listNamespacedPod({ namespace: kube.namespace, labelSelector }),
      ),
      kube.call("list workspace claims", () =>
        kube.core.listNamespacedPersistentVolumeClaim({ namespace: kube.namespace, labelSelector }),
      ),
    ]);
    const ids = new Set<string>();
    for (const object of [...pods.items, ...claims.items] as Array<{ metadata?: k8s.V1ObjectMeta }>) {
      const id = object.metadata?.annotations?.[ANNOTATIONS.poolId];
      if (isPoolId(id) && isBoundTo(object, owner)) ids.add(id);
    }
    return [...ids].map((id) => poolNames(id));
  }

  /** The bound pool machine `spec`'s handle names, when its claim is still there and bound to it. */
  private async boundMachineOf(spec: WorkspaceSpec, owner: WorkspaceOwner): Promise<MachineIdentity | null> {
    const id = pooledIdOf(spec.handle);
    if (!id) return null;
    const { kube } = this.context;
    const claim = await kube.readOrNull("read the workspace claim", () =>
      kube.core.readNamespacedPersistentVolumeClaim({ namespace: kube.namespace, name: poolNames(id).claim }),
    );
    if (!claim || claim.metadata?.deletionTimestamp || !isBoundTo(claim, owner)) return null;
    return boundIdentity(id, owner);
  }

  /**
   * CONFLICT when the Pod or claim under these names carries another installation's id, or is a pool
   * machine not bound to this workspace: stop and purge never delete what is not the workspace's
   * (provision refuses another installation's objects the same way).
   */
  private async refuseForeign(owner: WorkspaceOwner, names: MachineNames) {
    const { kube } = this.context;
    const installation = await this.context.installationId();
    const [pod, claim] = await Promise.all([
      kube.readOrNull("read the workspace Pod", () =>
        kube.core.readNamespacedPod({ namespace: kube.namespace, name: names.pod }),
      ),
      kube.readOrNull("read the workspace claim", () =>
        kube.core.readNamespacedPersistentVolumeClaim({ namespace: kube.namespace, name: names.claim }),
      ),
    ]);
    for (const object of [pod, claim]) {
      if (!object) continue;
      assertOwnObject(object, installation);
      if (names.pool !== null && !isBoundTo(object, owner)) {
        throw new AppError("CONFLICT", `${object.metadata?.name} is not bound to this workspace`, {
          details: { name: object.metadata?.name ?? null, pool: names.pool },
        });
      }
    }
  }

  private async deleteSecret(names: MachineNames) {
    const { kube } = this.context;
    await kube.deleteIfPresent("delete the gateway credentials", () =>
      kube.core.deleteNamespacedSecret({ namespace: kube.namespace, name: names.secret }),
    );
  }

  /**
   * The deny-egress policy, and the tenant's egress policy when configured (none for a pool machine: it
   * has no tenant until bound); checked once per process.
   */
  async ensurePolicies(tenantId: string | null) {
    const { config } = this.context;
    if (config.networkPolicy === "none") return;
    await this.ensurePolicy(denyEgressPolicy());
    const rules = tenantId === null ? undefined : config.tenantEgress[tenantId];
    if (tenantId !== null && rules && rules.length > 0)
      await this.ensurePolicy(tenantEgressPolicy(tenantId, rules));
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
