import { createHash } from "node:crypto";
import { AppError } from "@/server/shared/errors";

/** A workspace's identity: the same workspace id under another tenant or user is another workspace. */
export type KubernetesWorkspaceRef = { tenantId: string; userId: string; workspaceId: string };

export const LABELS = {
  managedBy: "app.kubernetes.io/managed-by",
  component: "app.kubernetes.io/component",
  /** The workspace key (names derive from it): selects the objects of one workspace. */
  key: "berth.dev/workspace-key",
  /** The installation that created the object (server/workspace/drivers/installation.ts). */
  installation: "berth.dev/installation",
  workspace: "berth.dev/workspace",
  tenant: "berth.dev/tenant",
  user: "berth.dev/user",
  agent: "berth.dev/agent",
  /** A warm pool machine (kubernetes-pool.ts): its id, hashed when it is not a label value. */
  pool: "berth.dev/pool",
  /** What the pool machine has baked in (`warmPoolKey`), set when it is made. */
  poolKey: "berth.dev/pool-key",
  /**
   * `idle` (nobody's), `bound` (a workspace's: it also carries the workspace's labels) or `discarding`.
   * Every change of it is a merge patch at the resourceVersion read, so a bind and a discard of the same
   * machine never both succeed.
   */
  poolState: "berth.dev/pool-state",
} as const;

export type PoolState = "idle" | "bound" | "discarding";

/** The ids verbatim (label values are limited to 63 safe characters, so long or odd ids are hashed there). */
export const ANNOTATIONS = {
  workspace: "berth.dev/workspace-id",
  tenant: "berth.dev/tenant-id",
  user: "berth.dev/user-id",
  agent: "berth.dev/agent-id",
  /** Hash of the Pod's spec: a Pod created under another configuration or image is replaced. */
  specHash: "berth.dev/spec-hash",
  /** How a claim holds the workspace (workspace-manifests.ts ClaimLayout); absent on claims made before. */
  claimLayout: "berth.dev/claim-layout",
  /** A pool machine's id verbatim (its label and names may carry a hash of it). */
  poolId: "berth.dev/pool-id",
} as const;

export const MANAGED_BY = "berth";
/** Workspace Pods and pool machines alike: the deny-egress policy selects both by it. */
export const COMPONENT = "workspace";
/** Every object of every workspace this driver created (any installation's: see installationSelector). */
const MANAGED_SELECTOR = `${LABELS.managedBy}=${MANAGED_BY},${LABELS.component}=${COMPONENT}`;

/** The workspace objects of one installation: what reconcile lists and reaps. */
export function installationSelector(installation: string): string {
  return `${MANAGED_SELECTOR},${LABELS.installation}=${installation}`;
}

/**
 * CONFLICT when an object (Pod, claim) under a workspace's name carries ANOTHER installation's label: it is
 * never reused or replaced from here. Objects without the label (made before installations were labelled)
 * are this installation's own legacy ones and reused.
 */
export function assertOwnObject(
  object: { metadata?: { name?: string; labels?: Record<string, string> } },
  installation: string | undefined,
): void {
  const owner = object.metadata?.labels?.[LABELS.installation];
  if (!owner || !installation || owner === installation) return;
  throw new AppError(
    "CONFLICT",
    `${object.metadata?.name} belongs to another Berth installation (${owner})`,
    {
      userMessage: "This workspace's Kubernetes objects belong to another Berth installation.",
      details: { name: object.metadata?.name ?? null },
    },
  );
}

/** Lowercase alphanumerics only: the workspace ids Berth assigns (hex). Others are hashed. */
const PLAIN_ID = /^[a-z0-9]{1,40}$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function sha256Hex(value: string): string {
  return createHash("sha256").update(value, "utf8").digest("hex");
}

/**
 * The deterministic, DNS-1123-safe key of a workspace: its id when plain (hashed otherwise) plus 8 hex of
 * (tenant, user), so equal ids of different owners never share a Pod. Every replica derives the same key,
 * which is what lets any process reattach after a restart.
 */
export function workspaceKey(ref: KubernetesWorkspaceRef): string {
  const idPart = PLAIN_ID.test(ref.workspaceId)
    ? ref.workspaceId
    : `h${sha256Hex(ref.workspaceId).slice(0, 24)}`;
  return `${idPart}-${sha256Hex(`${ref.tenantId}\0${ref.userId}`).slice(0, 8)}`;
}

/** `berth-ws-<key>`: at most 58 characters, so it is also a valid hostname. */
export function podName(ref: KubernetesWorkspaceRef): string {
  return `berth-ws-${workspaceKey(ref)}`;
}

export function claimName(ref: KubernetesWorkspaceRef): string {
  return `${podName(ref)}-data`;
}

/** The gateway's bearer token and instance nonce, for every Berth process that attaches. */
function gatewaySecretName(ref: KubernetesWorkspaceRef): string {
  return `${podName(ref)}-gateway`;
}

/** What one machine's objects are called: a workspace's own (from its ids) or a pool machine's (from its id). */
export type MachineNames = {
  pod: string;
  claim: string;
  /** The gateway's credentials (kubernetes-gateway.ts). */
  secret: string;
  /** The pool machine's id; null for a workspace's own objects. */
  pool: string | null;
};

export function workspaceNames(ref: KubernetesWorkspaceRef): MachineNames {
  return { pod: podName(ref), claim: claimName(ref), secret: gatewaySecretName(ref), pool: null };
}

/** A pool row's id as the seam allows it: letters, digits and `-`. */
const POOL_ID = /^[A-Za-z0-9][A-Za-z0-9-]{0,62}$/;
/** The ids Berth's pool assigns (`m` + hex) fit DNS-1123 names as they are; others are hashed there. */
const PLAIN_POOL_ID = /^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$/;

export function isPoolId(id: unknown): id is string {
  return typeof id === "string" && POOL_ID.test(id);
}

/** `berth-pool-<id>` (no tenant, user or workspace in it: the name stays when the machine is bound). */
export function poolNames(id: string): MachineNames {
  if (!isPoolId(id)) throw new AppError("BAD_REQUEST", `not a pool machine id: ${JSON.stringify(id)}`);
  const pod = `berth-pool-${PLAIN_POOL_ID.test(id) ? id : `h${sha256Hex(id).slice(0, 24)}`}`;
  return { pod, claim: `${pod}-data`, secret: `${pod}-gateway`, pool: id };
}

/** The deny-all-egress policy every workspace Pod is selected by. */
export const EGRESS_POLICY_NAME = "berth-workspaces-deny-egress";

/** The policy opening a tenant's configured egress. */
export function tenantEgressPolicyName(tenantId: string): string {
  return `berth-workspaces-egress-${sha256Hex(tenantId).slice(0, 16)}`;
}

/** A label value for an id: itself when Kubernetes accepts it, else `h` + 40 hex of its hash. */
export function labelValue(id: string): string {
  return id.length <= 63 && LABEL_VALUE.test(id) ? id : `h${sha256Hex(id).slice(0, 40)}`;
}

export function workspaceLabels(
  ref: KubernetesWorkspaceRef & { agentId: string; installation?: string },
): Record<string, string> {
  return {
    [LABELS.managedBy]: MANAGED_BY,
    [LABELS.component]: COMPONENT,
    ...(ref.installation ? { [LABELS.installation]: ref.installation } : {}),
    [LABELS.key]: workspaceKey(ref),
    [LABELS.workspace]: labelValue(ref.workspaceId),
    [LABELS.tenant]: labelValue(ref.tenantId),
    [LABELS.user]: labelValue(ref.userId),
    [LABELS.agent]: labelValue(ref.agentId),
  };
}

export function workspaceAnnotations(
  ref: KubernetesWorkspaceRef & { agentId: string },
): Record<string, string> {
  return {
    [ANNOTATIONS.workspace]: ref.workspaceId,
    [ANNOTATIONS.tenant]: ref.tenantId,
    [ANNOTATIONS.user]: ref.userId,
    [ANNOTATIONS.agent]: ref.agentId,
  };
}

export function specHash(spec: unknown): string {
  return sha256Hex(JSON.stringify(spec)).slice(0, 16);
}
