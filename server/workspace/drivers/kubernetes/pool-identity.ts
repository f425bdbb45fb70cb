import type { BackendHandle, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import {
  ANNOTATIONS,
  COMPONENT,
  isPoolId,
  LABELS,
  labelValue,
  MANAGED_BY,
  poolNames,
  workspaceAnnotations,
  workspaceKey,
  workspaceLabels,
  workspaceNames,
  type KubernetesWorkspaceRef,
  type MachineNames,
  type PoolState,
} from "./kubernetes-names";
import type { MachineIdentity, WorkspaceOwner } from "./workspace-manifests";

/**
 * Who a warm pool machine is (kubernetes-pool.ts) before and after a bind, and how a stored handle leads
 * every operation on a workspace to it. A pool machine keeps its pool names for life (Kubernetes cannot
 * rename a Pod or claim); binding changes only its labels and annotations, which are mutable.
 */

type Labelled = { metadata?: { labels?: Record<string, string> } };

/** The pool machine id a stored handle names, or null for a workspace's own Pod and claim. */
export function pooledIdOf(handle: BackendHandle | null | undefined): string | null {
  const pool = handle?.pool;
  return isPoolId(pool) ? pool : null;
}

/** The names `spec`'s machine goes by: the pool machine its stored handle names, else its own. */
export function machineNamesOf(spec: WorkspaceSpec): MachineNames {
  const pool = pooledIdOf(spec.handle);
  return pool ? poolNames(pool) : workspaceNames(spec);
}

export function poolStateOf(object: Labelled): PoolState | null {
  const state = object.metadata?.labels?.[LABELS.poolState];
  return state === "idle" || state === "bound" || state === "discarding" ? state : null;
}

/** True when a pool object was bound to exactly this workspace (same ids under another tenant: another one). */
export function isBoundTo(object: Labelled, ref: KubernetesWorkspaceRef): boolean {
  return poolStateOf(object) === "bound" && object.metadata?.labels?.[LABELS.key] === workspaceKey(ref);
}

/**
 * An idle machine: selected by the deny-egress policy (managed-by and component, as every workspace Pod)
 * and by reconcile's installation selector, but without the workspace key label, so `listResources` skips
 * it; no tenant, user, workspace or agent anywhere.
 */
export function poolIdentity(id: string, key: string, installation: string): MachineIdentity {
  return {
    names: poolNames(id),
    labels: {
      [LABELS.managedBy]: MANAGED_BY,
      [LABELS.component]: COMPONENT,
      [LABELS.installation]: installation,
      [LABELS.pool]: labelValue(id),
      [LABELS.poolKey]: key,
      [LABELS.poolState]: "idle",
    },
    annotations: { [ANNOTATIONS.poolId]: id },
    installation,
  };
}

/** What a bind writes over an idle machine's labels and annotations: the workspace's identity. */
export function boundMetadata(
  id: string,
  owner: WorkspaceOwner,
): { labels: Record<string, string>; annotations: Record<string, string> } {
  return {
    labels: { ...workspaceLabels(owner), [LABELS.pool]: labelValue(id), [LABELS.poolState]: "bound" },
    annotations: { ...workspaceAnnotations(owner), [ANNOTATIONS.poolId]: id },
  };
}

/** A bound machine as `create` remakes its Pod after a stop: pool names, the workspace's labels. */
export function boundIdentity(id: string, owner: WorkspaceOwner): MachineIdentity {
  return {
    names: poolNames(id),
    ...boundMetadata(id, owner),
    ...(owner.installation ? { installation: owner.installation } : {}),
    ...(owner.resources ? { resources: owner.resources } : {}),
  };
}

/** What `create`, `createIdleMachine` and `bindIdleMachine` return (the record stores it): no secrets. */
export function machineHandle(namespace: string, names: MachineNames, podUid: string | null): BackendHandle {
  return {
    kind: "kubernetes",
    namespace,
    pod: names.pod,
    claim: names.claim,
    podUid,
    ...(names.pool ? { pool: names.pool } : {}),
  };
}
