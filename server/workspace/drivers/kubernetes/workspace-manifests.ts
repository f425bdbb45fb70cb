import type { WorkspaceResources } from "@/server/workspace/drivers/driver";
import type * as k8s from "@kubernetes/client-node";
import type { KubernetesDriverConfig } from "./kubernetes-config";
import {
  ANNOTATIONS,
  COMPONENT,
  EGRESS_POLICY_NAME,
  LABELS,
  MANAGED_BY,
  specHash,
  tenantEgressPolicyName,
  labelValue,
  workspaceAnnotations,
  workspaceLabels,
  workspaceNames,
  type KubernetesWorkspaceRef,
  type MachineNames,
} from "./kubernetes-names";

/** `installation`: set by the workers' provision (labelled on what it creates); absent when only attaching. */
export type WorkspaceOwner = KubernetesWorkspaceRef & {
  agentId: string;
  installation?: string;
  /** The tenant's per-workspace quotas: they replace the configured limits (and the claim's size). */
  resources?: WorkspaceResources;
};

/**
 * What a machine's Pod and claim are called and carry: a workspace's own (`identityOf`), or a pool
 * machine's (kubernetes-pool.ts: pool names, labels without any tenant, user or workspace).
 */
export type MachineIdentity = {
  names: MachineNames;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** Checked against what is found under the names (assertOwnObject); absent when only attaching. */
  installation?: string;
  resources?: WorkspaceResources;
};

export function identityOf(subject: WorkspaceOwner | MachineIdentity): MachineIdentity {
  if ("names" in subject) return subject;
  return {
    names: workspaceNames(subject),
    labels: workspaceLabels(subject),
    annotations: workspaceAnnotations(subject),
    ...(subject.installation ? { installation: subject.installation } : {}),
    ...(subject.resources ? { resources: subject.resources } : {}),
  };
}

/** Containers of a workspace Pod and the paths inside them. */
export const POD = {
  /** Agent commands and file operations run here. */
  workspace: "workspace",
  /** The MCP gateway and the stdio MCP servers it starts run here, in a PID namespace of their own. */
  gateway: "gateway",
  workdir: "/workspace",
  home: "/home/berth",
  runtimeDir: "/run/berth",
  gatewaySocket: "/run/berth/gateway.sock",
  gatewayBundle: "/run/berth/berth-gateway.cjs",
  gatewayPidFile: "/run/berth/gateway.pid",
  gatewayLog: "/run/berth/gateway.log",
  gatewayTokenFile: "/run/berth/gateway.token",
} as const;

/**
 * How a claim holds a workspace. `workdir-and-home` (every claim made now, annotated so): the workdir and
 * the agent's HOME are the claim's `workdir/` and `home/` folders, so dotfiles, tool configs and shell
 * history survive a Pod's replacement as the files do. `workdir` (claims made before, without the
 * annotation): the whole claim is the workdir, as it always was, and HOME is an emptyDir.
 */
export type ClaimLayout = "workdir" | "workdir-and-home";
const CLAIM_LAYOUT: ClaimLayout = "workdir-and-home";

export function claimLayoutOf(claim: k8s.V1PersistentVolumeClaim): ClaimLayout {
  return claim.metadata?.annotations?.[ANNOTATIONS.claimLayout] === CLAIM_LAYOUT ? CLAIM_LAYOUT : "workdir";
}

/** tini as PID 1 when the image has it: it reaps what killed commands leave behind. */
const INIT = [
  "/bin/sh",
  "-c",
  'if command -v tini >/dev/null; then exec tini -s -- "$@"; else exec "$@"; fi',
  "init",
  "sleep",
  "infinity",
];

function commandEnv(config: KubernetesDriverConfig): Record<string, string> {
  return {
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    HOME: POD.home,
    LANG: "C.UTF-8",
    ...config.env,
  };
}

const hardened: k8s.V1SecurityContext = {
  allowPrivilegeEscalation: false,
  privileged: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ["ALL"] },
};

/**
 * The workspace Pod. Two containers of the configured image: `workspace` (the agent's commands) and
 * `gateway` (the MCP gateway, its token and its MCP servers), so the agent can neither see the gateway's
 * processes nor reach its socket (an emptyDir only the gateway container mounts). Both run as the non-root
 * workspace user with no capabilities, no privilege escalation and a read-only root filesystem; the claim
 * holds the workdir and the agent's HOME (writable through fsGroup; see ClaimLayout), /tmp is an emptyDir.
 * No service account token is mounted and restartPolicy is Never: a container that dies fails the Pod,
 * which the driver replaces.
 */
export function podManifest(
  config: KubernetesDriverConfig,
  subject: WorkspaceOwner | MachineIdentity,
  layout: ClaimLayout = CLAIM_LAYOUT,
): k8s.V1Pod {
  const machine = identityOf(subject);
  const homeOnClaim = layout === "workdir-and-home";
  const workdirMount = {
    name: "workdir",
    mountPath: POD.workdir,
    ...(homeOnClaim ? { subPath: "workdir" } : {}),
  };
  const homeMount = homeOnClaim
    ? { name: "workdir", mountPath: POD.home, subPath: "home" }
    : { name: "home", mountPath: POD.home };
  const env = Object.entries(commandEnv(config)).map(([name, value]) => ({ name, value }));
  const scratch = (name: string, medium?: string): k8s.V1Volume => ({
    name,
    emptyDir: { sizeLimit: config.scratchSizeLimit, ...(medium ? { medium } : {}) },
  });
  const spec: k8s.V1PodSpec = {
    restartPolicy: "Never",
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    terminationGracePeriodSeconds: config.terminationGracePeriodSeconds,
    ...(config.serviceAccountName ? { serviceAccountName: config.serviceAccountName } : {}),
    ...(config.runtimeClassName ? { runtimeClassName: config.runtimeClassName } : {}),
    ...(Object.keys(config.nodeSelector).length > 0 ? { nodeSelector: config.nodeSelector } : {}),
    ...(config.tolerations.length > 0 ? { tolerations: config.tolerations } : {}),
    ...(config.imagePullSecrets.length > 0
      ? { imagePullSecrets: config.imagePullSecrets.map((name) => ({ name })) }
      : {}),
    securityContext: {
      runAsNonRoot: true,
      runAsUser: config.uid,
      runAsGroup: config.gid,
      fsGroup: config.gid,
      fsGroupChangePolicy: "OnRootMismatch",
      seccompProfile: { type: "RuntimeDefault" },
    },
    containers: [
      {
        name: POD.workspace,
        image: config.image,
        imagePullPolicy: config.imagePullPolicy,
        command: INIT,
        workingDir: POD.workdir,
        env,
        resources: {
          requests: { ...config.requests },
          limits: quotaLimits(config.limits, machine.resources),
        },
        securityContext: hardened,
        volumeMounts: [workdirMount, { name: "tmp", mountPath: "/tmp" }, homeMount],
      },
      {
        name: POD.gateway,
        image: config.image,
        imagePullPolicy: config.imagePullPolicy,
        command: INIT,
        workingDir: POD.workdir,
        env,
        resources: { requests: { ...config.gatewayRequests }, limits: { ...config.gatewayLimits } },
        securityContext: hardened,
        volumeMounts: [
          workdirMount,
          { name: "gateway-run", mountPath: POD.runtimeDir },
          { name: "gateway-tmp", mountPath: "/tmp" },
          { name: "gateway-home", mountPath: POD.home },
        ],
      },
    ],
    volumes: [
      { name: "workdir", persistentVolumeClaim: { claimName: machine.names.claim } },
      scratch("tmp"),
      ...(homeOnClaim ? [] : [scratch("home")]),
      // In memory: the token file the gateway reads (and deletes) never reaches a node's disk.
      scratch("gateway-run", "Memory"),
      scratch("gateway-tmp"),
      scratch("gateway-home"),
    ],
  };
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: machine.names.pod,
      labels: machine.labels,
      annotations: { ...machine.annotations, [ANNOTATIONS.specHash]: specHash(spec) },
    },
    spec,
  };
}

/** The workdir's claim: outlives every Pod (stop keeps it), deleted by purge. */
export function claimManifest(
  config: KubernetesDriverConfig,
  subject: WorkspaceOwner | MachineIdentity,
): k8s.V1PersistentVolumeClaim {
  const machine = identityOf(subject);
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: machine.names.claim,
      labels: machine.labels,
      annotations: { ...machine.annotations, [ANNOTATIONS.claimLayout]: CLAIM_LAYOUT },
    },
    spec: {
      accessModes: [config.accessMode],
      resources: {
        requests: {
          storage: machine.resources?.diskBytes ? String(machine.resources.diskBytes) : config.storageSize,
        },
      },
      ...(config.storageClassName ? { storageClassName: config.storageClassName } : {}),
    },
  };
}

const workspacePods = { matchLabels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.component]: COMPONENT } };

/** Selects every workspace Pod and allows no egress: NetworkPolicies only add, so this is "deny all". */
export function denyEgressPolicy(): k8s.V1NetworkPolicy {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: EGRESS_POLICY_NAME, labels: { [LABELS.managedBy]: MANAGED_BY } },
    spec: { podSelector: workspacePods, policyTypes: ["Egress", "Ingress"], egress: [], ingress: [] },
  };
}

/** Opens a tenant's configured egress for that tenant's workspace Pods only. */
export function tenantEgressPolicy(
  tenantId: string,
  rules: KubernetesDriverConfig["tenantEgress"][string],
): k8s.V1NetworkPolicy {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: {
      name: tenantEgressPolicyName(tenantId),
      labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.tenant]: labelValue(tenantId) },
      annotations: { [ANNOTATIONS.tenant]: tenantId },
    },
    spec: {
      podSelector: { matchLabels: { ...workspacePods.matchLabels, [LABELS.tenant]: labelValue(tenantId) } },
      policyTypes: ["Egress"],
      egress: rules.map((rule) => ({
        to: [{ ipBlock: { cidr: rule.cidr } }],
        ...(rule.ports.length > 0 ? { ports: rule.ports.map((port) => ({ protocol: "TCP", port })) } : {}),
      })),
    },
  };
}

/** The configured limits with the tenant's per-workspace quotas in place of CPU and memory. */
function quotaLimits(limits: Record<string, string>, resources: WorkspaceResources | undefined) {
  return {
    ...limits,
    ...(resources?.cpus ? { cpu: String(resources.cpus) } : {}),
    ...(resources?.memoryBytes ? { memory: String(resources.memoryBytes) } : {}),
  };
}
