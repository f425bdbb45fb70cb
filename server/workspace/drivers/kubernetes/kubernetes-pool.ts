import { createHash } from "node:crypto";
import * as k8s from "@kubernetes/client-node";
import { AppError, isAppError } from "@/server/shared/errors";
import type {
  BackendHandle,
  CreateOptions,
  WorkspaceResources,
  WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import { attachGateway, credentialsStoreOf } from "./kubernetes-gateway";
import {
  ANNOTATIONS,
  assertOwnObject,
  installationSelector,
  isPoolId,
  LABELS,
  poolNames,
  workspaceKey,
  workspaceNames,
  type MachineNames,
} from "./kubernetes-names";
import { ownerOf, type KubernetesContext, type KubernetesMachines } from "./kubernetes-machines";
import {
  deleteClaimAndWait,
  deletePodAndWait,
  ensureClaim,
  ensureRunningPod,
  podVerdict,
} from "./pod-lifecycle";
import {
  boundMetadata,
  isBoundTo,
  machineHandle,
  pooledIdOf,
  poolIdentity,
  poolStateOf,
} from "./pool-identity";
import { claimLayoutOf, claimManifest, podManifest, type WorkspaceOwner } from "./workspace-manifests";

/** Bump when what a pool machine bakes in changes in a way the manifests and the bundle do not show. */
const POOL_KEY_VERSION = 1;

type Metadata = { labels: Record<string, string>; annotations: Record<string, string> };
type PoolObject = k8s.V1Pod | k8s.V1PersistentVolumeClaim;

/**
 * Kubernetes' warm pool: a Pod `berth-pool-<id>` and its claim made from the same manifests as a
 * workspace's, with no identity (pool-identity.ts), running with a healthy gateway. Binding is two merge
 * patches of labels and annotations (Pod first, then claim), each at the resourceVersion read: no Pod is
 * created, and from then on the machine is the workspace's, found through the stored handle `{ pool }`.
 */
export class KubernetesWarmPool {
  private keyOnce: Promise<string> | undefined;

  constructor(
    private readonly context: KubernetesContext,
    private readonly machines: KubernetesMachines,
  ) {}

  /**
   * What a machine made now has baked in: its Pod and claim specs (image, limits, runtime class, node
   * placement, security, env), the namespace and the gateway bundle. Once per process: the configuration
   * is, and the claim path of every provision asks.
   */
  key(): Promise<string> {
    this.keyOnce ??= this.computeKey().catch((error: unknown) => {
      this.keyOnce = undefined;
      throw error;
    });
    return this.keyOnce;
  }

  private async computeKey(): Promise<string> {
    const { config, kube, bundle } = this.context;
    // Names differ per machine and are not what it has baked in: a placeholder keeps the key per config.
    const identity = poolIdentity("key", "-", "-");
    const inputs = {
      POOL_KEY_VERSION,
      namespace: kube.namespace,
      pod: podManifest(config, identity).spec,
      claim: claimManifest(config, identity).spec,
      gateway: { bundle: (await bundle()).sha256, ...config.gateway },
    };
    return createHash("sha256").update(JSON.stringify(inputs)).digest("hex").slice(0, 16);
  }

  /**
   * Create-or-get of the idle machine's claim and Pod until it runs, then its gateway healthy. Idempotent
   * per id (a half-made one is finished; a Pod of another configuration replaced, as for a workspace). A
   * bound or discarded id is refused: a machine never goes back to a pool.
   */
  async createIdleMachine(id: string, options: CreateOptions = {}): Promise<BackendHandle> {
    const { kube, config, bundle } = this.context;
    const progress = options.onProgress ?? (() => undefined);
    const names = poolNames(id);
    const installation = await this.context.installationId();
    for (const object of await this.read(names)) {
      if (!object) continue;
      assertOwnObject(object, installation);
      const state = poolStateOf(object);
      if (state !== "idle") throw conflict(id, `it is ${state ?? "not a pool machine"}`);
    }
    await this.machines.ensurePolicies(null);
    const identity = poolIdentity(id, await this.key(), installation);
    const claim = await ensureClaim(kube, config, identity, progress);
    const pod = await ensureRunningPod(kube, config, identity, progress, claimLayoutOf(claim));
    const gateway = await attachGateway(kube, config, credentialsStoreOf(names, null), pod, bundle, () =>
      progress({ step: "gateway.starting" }),
    );
    progress({ step: "gateway.ready" });
    // Idle means ready: a first command and MCP need nothing more. Users attach their own tunnels.
    await gateway.tunnel.close();
    return machineHandle(kube.namespace, names, pod.metadata?.uid ?? null);
  }

  /**
   * Gives the running idle machine to `spec`'s workspace by writing the workspace's labels and annotations
   * over the Pod's, then the claim's. CONFLICT, touching nothing, when the machine is gone, not running,
   * bound or being discarded, when the workspace has a machine already, or when the tenant's quotas differ
   * from what the Pod was made with (its limits cannot change without a new Pod). Bound already to this
   * very workspace (an earlier run of the same provision): finishes the bind.
   */
  async bind(id: string, handle: BackendHandle, spec: WorkspaceSpec): Promise<BackendHandle> {
    const { kube } = this.context;
    if (pooledIdOf(handle) !== id) {
      throw new AppError("BAD_REQUEST", `handle ${JSON.stringify(handle)} is not pool machine ${id}'s`);
    }
    const names = poolNames(id);
    const installation = await this.context.installationId();
    const owner: WorkspaceOwner = { ...ownerOf(spec), installation };
    if (!this.fits(spec.resources)) {
      throw conflict(id, "the tenant's quotas differ from the pool's limits", "resources_differ");
    }
    const [[pod, claim], hasMachine] = await Promise.all([
      this.read(names),
      this.workspaceHasMachine(owner, id),
    ]);
    if (!pod || !claim) throw conflict(id, "it is gone", "gone");
    for (const object of [pod, claim]) assertOwnObject(object, installation);
    if (hasMachine) {
      throw conflict(id, "the workspace has a machine already", "workspace_has_machine");
    }
    if (podVerdict(pod).state !== "running") throw conflict(id, "its Pod is not running", "not_running");
    // The tenant's egress policy exists before its labels select the Pod: the first command has it.
    await this.machines.ensurePolicies(spec.tenantId);
    const metadata = boundMetadata(id, owner);
    // The Pod first: once it is bound a discard refuses the machine, so the claim cannot go under it.
    await this.relabel("Pod", id, pod, owner, metadata);
    try {
      await this.relabel("claim", id, claim, owner, metadata);
    } catch (error) {
      // Half bound: the Pod is the workspace's and never goes back to a pool, so it goes now (the caller
      // creates a machine the usual way); should that fail, purge and reap find it by its workspace key.
      await this.deleteMachine(names).catch(() => undefined);
      throw error;
    }
    return machineHandle(kube.namespace, names, pod.metadata?.uid ?? null);
  }

  /**
   * Deletes an unbound machine's Pod, Secret and claim. Idempotent. A machine whose Pod or claim is bound
   * is a workspace's: left exactly as it is. The machine is marked `discarding` first, at the versions
   * read, so a bind racing this discard fails instead of binding a machine about to go.
   */
  async discard(id: string): Promise<void> {
    const names = poolNames(id);
    const installation = await this.context.installationId();
    for (let attempt = 0; ; attempt++) {
      const objects = await this.read(names);
      for (const object of objects) if (object) assertOwnObject(object, installation);
      if (objects.some((object) => object && poolStateOf(object) === "bound")) return;
      try {
        for (const [kind, object] of [
          ["Pod", objects[0]],
          ["claim", objects[1]],
        ] as const) {
          if (!object || poolStateOf(object) === "discarding") continue;
          await this.patch(kind, object, { labels: { [LABELS.poolState]: "discarding" }, annotations: {} });
        }
        break;
      } catch (error) {
        // Changed since it was read (a bind, or another discard): read it again.
        if (!(isAppError(error) && (error.code === "CONFLICT" || error.code === "NOT_FOUND")) || attempt >= 4)
          throw error;
      }
    }
    await this.deleteMachine(names);
  }

  /** Ids of this installation's pool machines none of whose objects is bound (idle, half made, discarding). */
  async listIdle(): Promise<string[]> {
    const { kube } = this.context;
    const labelSelector = `${installationSelector(await this.context.installationId())},${LABELS.pool}`;
    const [pods, claims] = await Promise.all([
      kube.call("list pool Pods", () =>
        kube.core.listNamespacedPod({ namespace: kube.namespace, labelSelector }),
      ),
      kube.call("list pool claims", () =>
        kube.core.listNamespacedPersistentVolumeClaim({ namespace: kube.namespace, labelSelector }),
      ),
    ]);
    const idle = new Set<string>();
    const bound = new Set<string>();
    for (const object of [...pods.items, ...claims.items] as PoolObject[]) {
      const id = object.metadata?.annotations?.[ANNOTATIONS.poolId];
      if (!isPoolId(id)) continue;
      (poolStateOf(object) === "bound" ? bound : idle).add(id);
    }
    return [...idle].filter((id) => !bound.has(id)).sort();
  }

  /** True when the tenant's quotas leave the Pod's limits and the claim's size as the pool made them. */
  private fits(resources: WorkspaceResources | undefined): boolean {
    if (!resources) return true;
    const { config } = this.context;
    const plain = poolIdentity("fit", "-", "-");
    const quota = { ...plain, resources };
    const specs = (identity: typeof plain) =>
      JSON.stringify([podManifest(config, identity).spec, claimManifest(config, identity).spec]);
    return specs(plain) === specs(quota);
  }

  /**
   * The workspace has a Pod or claim of its own, or another pool machine bound to it: a second machine
   * would leave it two (and a bind must find a workspace without data).
   */
  private async workspaceHasMachine(owner: WorkspaceOwner, id: string): Promise<boolean> {
    const { kube } = this.context;
    const labelSelector = `${installationSelector(owner.installation!)},${LABELS.key}=${workspaceKey(owner)}`;
    const [own, pods, claims] = await Promise.all([
      this.read(workspaceNames(owner)),
      kube.call("list workspace Pods", () =>
        kube.core.listNamespacedPod({ namespace: kube.namespace, labelSelector }),
      ),
      kube.call("list workspace claims", () =>
        kube.core.listNamespacedPersistentVolumeClaim({ namespace: kube.namespace, labelSelector }),
      ),
    ]);
    const others = [...pods.items, ...claims.items].filter(
      (object) => object.metadata?.annotations?.[ANNOTATIONS.poolId] !== id,
    );
    return own.some((object) => object !== null) || others.length > 0;
  }

  /** Writes the workspace's metadata over an idle object, at the version read; one bound to it already stays. */
  private async relabel(
    kind: "Pod" | "claim",
    id: string,
    object: PoolObject,
    owner: WorkspaceOwner,
    metadata: Metadata,
  ) {
    if (isBoundTo(object, owner)) return;
    const state = poolStateOf(object);
    if (state !== "idle") throw conflict(id, `its ${kind} is ${state ?? "not a pool machine's"}`);
    try {
      await this.patch(kind, object, metadata);
    } catch (error) {
      if (isAppError(error) && (error.code === "CONFLICT" || error.code === "NOT_FOUND")) {
        throw conflict(id, `its ${kind} changed meanwhile (a discard or another bind)`);
      }
      throw error;
    }
  }

  /** A merge patch of labels and annotations with the object's resourceVersion: a precondition (409). */
  private async patch(kind: "Pod" | "claim", object: PoolObject, metadata: Metadata) {
    const { kube } = this.context;
    const name = object.metadata!.name!;
    const body = { metadata: { resourceVersion: object.metadata?.resourceVersion, ...metadata } };
    const options = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
    const namespace = kube.namespace;
    if (kind === "Pod") {
      await kube.call("label a pool Pod", () =>
        kube.core.patchNamespacedPod({ namespace, name, body }, options),
      );
    } else {
      await kube.call("label a pool claim", () =>
        kube.core.patchNamespacedPersistentVolumeClaim({ namespace, name, body }, options),
      );
    }
  }

  private async deleteMachine(names: MachineNames) {
    const { kube, config } = this.context;
    await deletePodAndWait(kube, names.pod, 0, config);
    await kube.deleteIfPresent("delete the gateway credentials", () =>
      kube.core.deleteNamespacedSecret({ namespace: kube.namespace, name: names.secret }),
    );
    await deleteClaimAndWait(kube, names.claim, config);
  }

  /** The machine's Pod and claim, each null when absent. */
  private read(names: MachineNames): Promise<[k8s.V1Pod | null, k8s.V1PersistentVolumeClaim | null]> {
    const { kube } = this.context;
    return Promise.all([
      kube.readOrNull("read a pool Pod", () =>
        kube.core.readNamespacedPod({ namespace: kube.namespace, name: names.pod }),
      ),
      kube.readOrNull("read a pool claim", () =>
        kube.core.readNamespacedPersistentVolumeClaim({ namespace: kube.namespace, name: names.claim }),
      ),
    ]);
  }
}

function conflict(id: string, reason: string, code?: string): AppError {
  return new AppError("CONFLICT", `pool machine ${id} cannot be used: ${reason}`, {
    details: { pool: id, ...(code ? { reason: code } : {}) },
  });
}
