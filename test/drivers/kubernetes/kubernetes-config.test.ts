import { instantiateDriver } from "@/server/workspace/drivers/driver";
import { describe, expect, it } from "vitest";
import { isAppError } from "@/server/shared/errors";
import { kubernetesDriver } from "@/server/workspace/drivers/kubernetes/driver";
import {
  claimName,
  labelValue,
  podName,
  poolNames,
  workspaceKey,
  workspaceLabels,
} from "@/server/workspace/drivers/kubernetes/kubernetes-names";
import { claimManifest, podManifest } from "@/server/workspace/drivers/kubernetes/workspace-manifests";
import { ownerOf } from "@/server/workspace/drivers/kubernetes/kubernetes-machines";
import {
  boundIdentity,
  machineNamesOf,
  poolIdentity,
} from "@/server/workspace/drivers/kubernetes/pool-identity";

const context = { basedir: "/var/lib/berth", cwd: "/srv/berth", uid: 1000 };
const fromEnv = (env: Record<string, string>) =>
  kubernetesDriver.configSchema.parse(kubernetesDriver.configFromEnv(env, context));

function bootError(env: Record<string, string>): string {
  try {
    fromEnv(env);
  } catch (error) {
    if (isAppError(error)) return error.message;
    throw error;
  }
  throw new Error("expected the configuration to be refused");
}

describe("Kubernetes driver configuration from the environment", () => {
  it("needs a kubeconfig or in-cluster variables, and says which to set", () => {
    expect(bootError({})).toMatch(/BERTH_K8S_KUBECONFIG: set BERTH_K8S_KUBECONFIG to a kubeconfig file/);
    expect(bootError({ BERTH_K8S_IN_CLUSTER: "true" })).toMatch(/KUBERNETES_SERVICE_HOST/);
  });

  it("reads a kubeconfig path relative to the cwd, or in-cluster from the kubelet's variables", () => {
    const config = fromEnv({ BERTH_K8S_KUBECONFIG: "deploy/kubeconfig", BERTH_K8S_CONTEXT: "prod" });
    expect(config.connection).toEqual({
      source: "kubeconfig",
      path: "/srv/berth/deploy/kubeconfig",
      context: "prod",
    });
    const inCluster = fromEnv({ KUBERNETES_SERVICE_HOST: "10.0.0.1", KUBERNETES_SERVICE_PORT: "443" });
    expect(inCluster.connection).toMatchObject({ source: "in-cluster", host: "10.0.0.1", port: 443 });
    expect(inCluster).toMatchObject({
      image: "berth-base:bookworm",
      storageSize: "10Gi",
      networkPolicy: "deny-egress",
    });
  });

  it("parses every BERTH_K8S_* setting and names the variable of a bad value", () => {
    const config = fromEnv({
      BERTH_K8S_KUBECONFIG: "/etc/berth/kubeconfig",
      BERTH_K8S_NAMESPACE: "workspaces",
      BERTH_K8S_IMAGE: "registry.example/berth-ws:3",
      BERTH_K8S_STORAGE_CLASS: "fast-ssd",
      BERTH_K8S_STORAGE_SIZE: "20Gi",
      BERTH_K8S_MEMORY_LIMIT: "2Gi",
      BERTH_K8S_NODE_SELECTOR: "pool=agents, disktype=ssd",
      BERTH_K8S_TOLERATIONS: '[{"key":"agents","operator":"Exists","effect":"NoSchedule"}]',
      BERTH_K8S_RUNTIME_CLASS: "gvisor",
      BERTH_K8S_TENANT_EGRESS: '{"t1":[{"cidr":"10.1.0.0/16","ports":[443]}]}',
      BERTH_K8S_IMAGE_PULL_SECRETS: "regcred, other",
      BERTH_K8S_POLL_INTERVAL_MS: "250",
    });
    expect(config).toMatchObject({
      namespace: "workspaces",
      image: "registry.example/berth-ws:3",
      storageClassName: "fast-ssd",
      storageSize: "20Gi",
      limits: { cpu: "1", memory: "2Gi" },
      nodeSelector: { pool: "agents", disktype: "ssd" },
      tolerations: [{ key: "agents", operator: "Exists", effect: "NoSchedule" }],
      runtimeClassName: "gvisor",
      tenantEgress: { t1: [{ cidr: "10.1.0.0/16", ports: [443] }] },
      imagePullSecrets: ["regcred", "other"],
      pollIntervalMs: 250,
    });
    const base = { BERTH_K8S_KUBECONFIG: "/k" };
    expect(bootError({ ...base, BERTH_K8S_MEMORY_LIMIT: "lots" })).toMatch(
      /BERTH_K8S_MEMORY_LIMIT: not a Kubernetes quantity/,
    );
    expect(bootError({ ...base, BERTH_K8S_NAMESPACE: "Not_Valid" })).toMatch(/BERTH_K8S_NAMESPACE/);
    expect(bootError({ ...base, BERTH_K8S_TOLERATIONS: "[oops" })).toMatch(
      /BERTH_K8S_TOLERATIONS: not valid JSON/,
    );
    expect(bootError({ ...base, BERTH_K8S_NODE_SELECTOR: "novalue" })).toMatch(/BERTH_K8S_NODE_SELECTOR/);
    expect(bootError({ ...base, BERTH_K8S_POLL_INTERVAL_MS: "5" })).toMatch(/BERTH_K8S_POLL_INTERVAL_MS/);
  });

  it("refuses a kubeconfig file that does not exist at the boot check (the client loads on first use)", async () => {
    const config = fromEnv({ BERTH_K8S_KUBECONFIG: "/nonexistent/kubeconfig" });
    const driver = instantiateDriver(kubernetesDriver, config, context);
    await expect(driver.probe!()).rejects.toThrow(/cannot load the kubeconfig \/nonexistent\/kubeconfig/);
  });
});

describe("Kubernetes names and labels", () => {
  const owner = { tenantId: "t1", userId: "u1", workspaceId: "0123456789abcdef", agentId: "a1" };

  it("derives DNS-1123 names from the workspace id, owner-qualified and hashed when not plain", () => {
    expect(podName(owner)).toMatch(/^berth-ws-0123456789abcdef-[0-9a-f]{8}$/);
    expect(claimName(owner)).toBe(`${podName(owner)}-data`);
    expect(workspaceKey({ ...owner, tenantId: "t2" })).not.toBe(workspaceKey(owner));
    const odd = podName({ ...owner, workspaceId: "Weird_ID/with:stuff".repeat(5) });
    expect(odd).toMatch(/^berth-ws-h[0-9a-f]{24}-[0-9a-f]{8}$/);
    expect(odd.length).toBeLessThanOrEqual(63);
    expect(podName({ ...owner, workspaceId: "f".repeat(32) }).length).toBeLessThanOrEqual(63);
  });

  it("keeps label values valid: ids as they are when allowed, hashed otherwise", () => {
    expect(labelValue("tenant-1")).toBe("tenant-1");
    expect(labelValue("user@example.com")).toMatch(/^h[0-9a-f]{40}$/);
    expect(labelValue("x".repeat(64))).toMatch(/^h[0-9a-f]{40}$/);
    expect(workspaceLabels({ ...owner, agentId: "" })["berth.dev/agent"]).toBe("");
  });

  it("builds a hardened Pod whose spec hash follows the configuration", () => {
    const config = kubernetesDriver.configSchema.parse({ connection: { source: "kubeconfig", path: "/k" } });
    const pod = podManifest(config, owner);
    expect(pod.spec?.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, fsGroup: 1000 });
    expect(pod.spec?.containers.every((container) => container.securityContext?.readOnlyRootFilesystem)).toBe(
      true,
    );
    const other = podManifest({ ...config, image: "other:1" }, owner);
    expect(other.metadata?.annotations?.["berth.dev/spec-hash"]).not.toBe(
      pod.metadata?.annotations?.["berth.dev/spec-hash"],
    );
  });

  it("gives a workspace the tenant's per-workspace quotas as its limits and claim size", () => {
    const config = kubernetesDriver.configSchema.parse({ connection: { source: "kubeconfig", path: "/k" } });
    const spec = {
      workspaceId: "w1",
      tenantId: "t1",
      userId: "u1",
      agentId: "a1",
      isolation: "per_agent" as const,
    };
    const quota = ownerOf({ ...spec, resources: { cpus: 2, memoryBytes: 2 ** 31, diskBytes: 5 * 2 ** 30 } });
    const workspaceContainer = (owner: typeof quota) =>
      podManifest(config, owner).spec!.containers.find((container) => container.name === "workspace")!;
    expect(workspaceContainer(quota).resources?.limits).toEqual({ cpu: "2", memory: String(2 ** 31) });
    expect(claimManifest(config, quota).spec?.resources?.requests).toEqual({ storage: String(5 * 2 ** 30) });
    // Without quotas: the configured limits and size.
    const plain = ownerOf(spec);
    expect(workspaceContainer(plain).resources?.limits).toEqual(config.limits);
    expect(claimManifest(config, plain).spec?.resources?.requests).toEqual({ storage: config.storageSize });
  });

  it("names a pool machine from its id alone, and gives it the workspace's identity only once bound", () => {
    expect(poolNames("m0123abcd")).toEqual({
      pod: "berth-pool-m0123abcd",
      claim: "berth-pool-m0123abcd-data",
      secret: "berth-pool-m0123abcd-gateway",
      pool: "m0123abcd",
    });
    // Letters the seam allows but DNS names do not: hashed in names, kept verbatim in the annotation.
    expect(poolNames("Upper-Case").pod).toMatch(/^berth-pool-h[0-9a-f]{24}$/);
    expect(() => poolNames("../x")).toThrow(/not a pool machine id/);

    const config = kubernetesDriver.configSchema.parse({ connection: { source: "kubeconfig", path: "/k" } });
    const idle = podManifest(config, poolIdentity("Upper-Case", "key1", "inst"));
    expect(idle.metadata?.labels).toEqual({
      "app.kubernetes.io/managed-by": "berth",
      "app.kubernetes.io/component": "workspace",
      "berth.dev/installation": "inst",
      "berth.dev/pool": "Upper-Case",
      "berth.dev/pool-key": "key1",
      "berth.dev/pool-state": "idle",
    });
    expect(idle.metadata?.annotations).toMatchObject({ "berth.dev/pool-id": "Upper-Case" });
    expect(idle.spec?.volumes?.[0]?.persistentVolumeClaim?.claimName).toBe(poolNames("Upper-Case").claim);
    // The same Pod spec as a workspace's but for the claim's name: what the pool key digests.
    const own = podManifest(config, owner).spec!;
    expect({ ...idle.spec, volumes: idle.spec?.volumes?.slice(1) }).toEqual({
      ...own,
      volumes: own.volumes?.slice(1),
    });

    const bound = podManifest(config, boundIdentity("m1", { ...owner, installation: "inst" }));
    expect(bound.metadata).toMatchObject({
      name: "berth-pool-m1",
      labels: { "berth.dev/tenant": "t1", "berth.dev/workspace-key": workspaceKey(owner) },
    });
    const spec = { ...owner, isolation: "per_agent" as const };
    expect(machineNamesOf({ ...spec, handle: { pool: "m1" } }).pod).toBe("berth-pool-m1");
    expect(machineNamesOf({ ...spec, handle: { pod: "berth-pool-m1" } }).pod).toBe(podName(owner));
  });
});
