import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { parseEnv, type RawEnv } from "@/server/shared/env-parsing";
import type { DriverContext } from "@/server/workspace/drivers/driver";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** A resource.Quantity as the API server accepts it (`512Mi`, `1`, `250m`, `1.5Gi`). */
const QUANTITY = /^[+]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$/;
const zQuantity = z.string().regex(QUANTITY, "not a Kubernetes quantity (e.g. 512Mi, 1Gi, 250m, 2)");

const ZResources = z.object({
  cpu: zQuantity,
  memory: zQuantity,
});

const ZToleration = z.object({
  key: z.string().optional(),
  operator: z.enum(["Exists", "Equal"]).optional(),
  value: z.string().optional(),
  effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
  tolerationSeconds: z.number().int().optional(),
});

/** Egress a tenant's workspaces may reach despite the deny-all policy (CIDRs, optionally ports). */
const ZEgressRule = z.object({
  cidr: z.string().regex(/^[0-9a-fA-F:.]+\/\d{1,3}$/, "not a CIDR"),
  ports: z.array(z.number().int().min(1).max(65535)).default([]),
});

/**
 * Configuration of the Kubernetes driver, validated once at boot (configFromEnv reads the environment into
 * this shape; tests and other composition roots may build it directly).
 */
export const ZKubernetesDriverConfig = z.object({
  /** How to reach the API server: a kubeconfig file, or the Pod's service account (in-cluster). */
  connection: z.discriminatedUnion("source", [
    z.object({
      source: z.literal("kubeconfig"),
      path: z.string().refine((value) => path.isAbsolute(value), "must be an absolute path"),
      /** A context of that file (default: its current-context). */
      context: z.string().optional(),
    }),
    z.object({
      source: z.literal("in-cluster"),
      host: z.string().min(1),
      port: z.number().int().min(1).max(65535),
      /** Holds `token`, `ca.crt` and `namespace`, as mounted into every Pod with a service account. */
      serviceAccountDir: z.string().default("/var/run/secrets/kubernetes.io/serviceaccount"),
    }),
  ]),
  /** Namespace of every workspace's Pod and claim. Unset: the kubeconfig context's (or service account's). */
  namespace: z.string().regex(DNS_LABEL, "not a namespace name").optional(),
  /** The workspace image: needs /bin/sh, coreutils, findutils, grep, tar, util-linux (setsid) and Node ≥ 18. */
  image: z.string().min(1).default("berth-base:bookworm"),
  imagePullPolicy: z.enum(["Always", "IfNotPresent", "Never"]).default("IfNotPresent"),
  imagePullSecrets: z.array(z.string().min(1)).default([]),
  /** Storage class of the workdir claims (unset: the cluster's default class). */
  storageClassName: z.string().min(1).optional(),
  storageSize: zQuantity.default("10Gi"),
  accessMode: z.enum(["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"]).default("ReadWriteOnce"),
  /** The agent's container (its commands and file operations). */
  requests: ZResources.default({ cpu: "250m", memory: "512Mi" }),
  limits: ZResources.default({ cpu: "1", memory: "1Gi" }),
  /** The gateway's container (the MCP gateway and the stdio MCP servers it starts). */
  gatewayRequests: ZResources.default({ cpu: "50m", memory: "128Mi" }),
  gatewayLimits: ZResources.default({ cpu: "500m", memory: "512Mi" }),
  /** Size bound of each emptyDir (/tmp and HOME of both containers). */
  scratchSizeLimit: zQuantity.default("1Gi"),
  /** The non-root user everything in the Pod runs as (runAsNonRoot; fsGroup makes the claim writable). */
  uid: z.number().int().min(1).default(1000),
  gid: z.number().int().min(1).default(1000),
  nodeSelector: z.record(z.string(), z.string()).default({}),
  tolerations: z.array(ZToleration).default([]),
  /** e.g. `gvisor`: must exist as a RuntimeClass (the API server refuses Pods naming an unknown one). */
  runtimeClassName: z.string().min(1).optional(),
  /** Service account of workspace Pods (its token is never mounted). Unset: the namespace's `default`. */
  serviceAccountName: z.string().min(1).optional(),
  /** Extra environment of every command. */
  env: z.record(z.string(), z.string()).default({}),
  /**
   * `deny-egress` (default): a NetworkPolicy selects every workspace Pod and allows no egress at all, which
   * `tenantEgress` opens per tenant. `none`: no policy is created (the namespace's own policies apply).
   */
  networkPolicy: z.enum(["deny-egress", "none"]).default("deny-egress"),
  /** Per tenant id: egress its workspaces may reach (an additional NetworkPolicy per tenant). */
  tenantEgress: z.record(z.string(), z.array(ZEgressRule)).default({}),
  /** A Pod that is not Running within this long fails the provision with the scheduler's or kubelet's reason. */
  pendingTimeoutMs: z.number().int().min(1_000).default(180_000),
  /** Bound on a Pod or claim deletion finishing (purge and stop wait until they are gone). */
  deleteTimeoutMs: z.number().int().min(1_000).default(180_000),
  /**
   * Longest pause between two reads of a Pod or claim the driver waits on (starting, deleting): the reads
   * back off from 25 ms up to this. A state change is seen up to this long after it happened; shorter costs
   * more GETs against the API server.
   */
  pollIntervalMs: z.number().int().min(25).max(60_000).default(1_000),
  /** Grace period of `stop` (SIGTERM, then SIGKILL). */
  terminationGracePeriodSeconds: z.number().int().min(0).default(5),
  gateway: z
    .object({
      callTimeoutMs: z.number().int().positive().default(30_000),
      startTimeoutMs: z.number().int().positive().default(30_000),
    })
    .prefault({}),
  /** A prebuilt gateway bundle (`npm run build:gateway`); unset: bundled from the sources on first use. */
  gatewayBundlePath: z.string().optional(),
  /** Host folder of the local unix sockets that tunnel to each Pod's gateway through exec (0700). */
  tunnelDir: z
    .string()
    .refine((value) => path.isAbsolute(value), "must be an absolute path")
    .default(path.join(os.tmpdir(), "berth-k8s")),
});

export type KubernetesDriverConfig = z.infer<typeof ZKubernetesDriverConfig>;
export type KubernetesDriverConfigInput = z.input<typeof ZKubernetesDriverConfig>;

const zJson = <T extends z.ZodType>(schema: T) =>
  z
    .string()
    .transform((value, context) => {
      try {
        return JSON.parse(value) as unknown;
      } catch {
        context.addIssue({ code: "custom", message: "not valid JSON" });
        return z.NEVER;
      }
    })
    .pipe(schema);

/** `a=b,c=d` → `{ a: "b", c: "d" }`. */
const zPairs = z
  .string()
  .transform((value) =>
    value
      .split(",")
      .map((pair) => pair.trim())
      .filter(Boolean),
  )
  .pipe(z.array(z.string().regex(/^[^=]+=[^=]*$/, "expected key=value pairs separated by commas")))
  .transform((pairs) => Object.fromEntries(pairs.map((pair) => pair.split("=") as [string, string])));

const zInt = z.coerce.number().int();

/** The driver's own variables (BERTH_K8S_*), plus the ones the kubelet sets in every Pod for in-cluster use. */
const ZKubernetesEnv = z.object({
  BERTH_K8S_KUBECONFIG: z.string().optional(),
  BERTH_K8S_CONTEXT: z.string().optional(),
  BERTH_K8S_IN_CLUSTER: z.stringbool().optional(),
  KUBERNETES_SERVICE_HOST: z.string().optional(),
  KUBERNETES_SERVICE_PORT: zInt.optional(),
  BERTH_K8S_NAMESPACE: z.string().regex(DNS_LABEL, "not a namespace name").optional(),
  BERTH_K8S_IMAGE: z.string().optional(),
  BERTH_K8S_IMAGE_PULL_POLICY: z.enum(["Always", "IfNotPresent", "Never"]).optional(),
  BERTH_K8S_IMAGE_PULL_SECRETS: z.string().optional(),
  BERTH_K8S_STORAGE_CLASS: z.string().optional(),
  BERTH_K8S_STORAGE_SIZE: zQuantity.optional(),
  BERTH_K8S_ACCESS_MODE: z.enum(["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"]).optional(),
  BERTH_K8S_CPU_REQUEST: zQuantity.optional(),
  BERTH_K8S_CPU_LIMIT: zQuantity.optional(),
  BERTH_K8S_MEMORY_REQUEST: zQuantity.optional(),
  BERTH_K8S_MEMORY_LIMIT: zQuantity.optional(),
  BERTH_K8S_NODE_SELECTOR: zPairs.optional(),
  BERTH_K8S_TOLERATIONS: zJson(z.array(ZToleration)).optional(),
  BERTH_K8S_RUNTIME_CLASS: z.string().optional(),
  BERTH_K8S_SERVICE_ACCOUNT: z.string().optional(),
  BERTH_K8S_NETWORK_POLICY: z.enum(["deny-egress", "none"]).optional(),
  BERTH_K8S_TENANT_EGRESS: zJson(z.record(z.string(), z.array(ZEgressRule))).optional(),
  BERTH_K8S_PENDING_TIMEOUT_MS: zInt.min(1_000).optional(),
  BERTH_K8S_POLL_INTERVAL_MS: zInt.min(25).max(60_000).optional(),
  BERTH_K8S_UID: zInt.min(1).optional(),
  BERTH_K8S_GID: zInt.min(1).optional(),
  BERTH_K8S_GATEWAY_BUNDLE: z.string().optional(),
  BERTH_K8S_GATEWAY_START_TIMEOUT_MS: zInt.min(1_000).optional(),
});

/**
 * Reads BERTH_K8S_* into config input. The connection: BERTH_K8S_KUBECONFIG (a file, relative to the cwd)
 * wins; otherwise in-cluster when the kubelet's KUBERNETES_SERVICE_HOST/PORT are set (or
 * BERTH_K8S_IN_CLUSTER=true demands it); otherwise boot fails saying which variable to set.
 */
export function kubernetesConfigFromEnv(env: RawEnv, context: DriverContext): KubernetesDriverConfigInput {
  const parsed = parseEnv(ZKubernetesEnv, env, "Kubernetes workspace driver (BERTH_K8S_*)");
  const connection = connectionOf(parsed, context);
  const defined = <T extends Record<string, unknown>>(value: T) =>
    Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as Partial<T>;
  const resources = (
    cpu: string | undefined,
    memory: string | undefined,
    fallback: { cpu: string; memory: string },
  ) => (cpu || memory ? { cpu: cpu ?? fallback.cpu, memory: memory ?? fallback.memory } : undefined);
  return {
    connection,
    ...defined({
      namespace: parsed.BERTH_K8S_NAMESPACE,
      image: parsed.BERTH_K8S_IMAGE,
      imagePullPolicy: parsed.BERTH_K8S_IMAGE_PULL_POLICY,
      imagePullSecrets: parsed.BERTH_K8S_IMAGE_PULL_SECRETS?.split(",")
        .map((name) => name.trim())
        .filter(Boolean),
      storageClassName: parsed.BERTH_K8S_STORAGE_CLASS,
      storageSize: parsed.BERTH_K8S_STORAGE_SIZE,
      accessMode: parsed.BERTH_K8S_ACCESS_MODE,
      requests: resources(parsed.BERTH_K8S_CPU_REQUEST, parsed.BERTH_K8S_MEMORY_REQUEST, {
        cpu: "250m",
        memory: "512Mi",
      }),
      limits: resources(parsed.BERTH_K8S_CPU_LIMIT, parsed.BERTH_K8S_MEMORY_LIMIT, {
        cpu: "1",
        memory: "1Gi",
      }),
      nodeSelector: parsed.BERTH_K8S_NODE_SELECTOR,
      tolerations: parsed.BERTH_K8S_TOLERATIONS,
      runtimeClassName: parsed.BERTH_K8S_RUNTIME_CLASS,
      serviceAccountName: parsed.BERTH_K8S_SERVICE_ACCOUNT,
      networkPolicy: parsed.BERTH_K8S_NETWORK_POLICY,
      tenantEgress: parsed.BERTH_K8S_TENANT_EGRESS,
      pendingTimeoutMs: parsed.BERTH_K8S_PENDING_TIMEOUT_MS,
      pollIntervalMs: parsed.BERTH_K8S_POLL_INTERVAL_MS,
      uid: parsed.BERTH_K8S_UID,
      gid: parsed.BERTH_K8S_GID,
      gatewayBundlePath:
        parsed.BERTH_K8S_GATEWAY_BUNDLE && path.resolve(context.cwd, parsed.BERTH_K8S_GATEWAY_BUNDLE),
      gateway: parsed.BERTH_K8S_GATEWAY_START_TIMEOUT_MS
        ? { startTimeoutMs: parsed.BERTH_K8S_GATEWAY_START_TIMEOUT_MS }
        : undefined,
    }),
  };
}

function connectionOf(
  parsed: z.infer<typeof ZKubernetesEnv>,
  context: DriverContext,
): KubernetesDriverConfigInput["connection"] {
  if (parsed.BERTH_K8S_KUBECONFIG) {
    return {
      source: "kubeconfig",
      path: path.resolve(context.cwd, parsed.BERTH_K8S_KUBECONFIG),
      ...(parsed.BERTH_K8S_CONTEXT ? { context: parsed.BERTH_K8S_CONTEXT } : {}),
    };
  }
  const host = parsed.KUBERNETES_SERVICE_HOST;
  const port = parsed.KUBERNETES_SERVICE_PORT;
  if (host && port) return { source: "in-cluster", host, port };
  const why = parsed.BERTH_K8S_IN_CLUSTER
    ? "BERTH_K8S_IN_CLUSTER=true, but KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set (not running in a Pod?)"
    : "set BERTH_K8S_KUBECONFIG to a kubeconfig file, or run Berth in a Pod of the cluster (in-cluster config)";
  // Thrown through parseEnv's path so the boot message has the same shape as every other config error.
  return parseEnv(
    z.object({ BERTH_K8S_KUBECONFIG: z.string({ error: why }) }),
    {},
    "Kubernetes workspace driver (BERTH_K8S_*)",
  ) as never;
}
