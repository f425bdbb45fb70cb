/**
 * deploy/kubernetes/: the Role grants exactly what the driver calls. The emulator records every request in
 * RBAC's terms while one driver goes through its whole life (provision with tenant egress, attach, files, a
 * gateway restart, a changed policy, an eviction, a Pod stuck Pending, stop, reconcile, reap, purge, a warm
 * pool machine made, bound and purged); the Role must grant each recorded (group, resource, verb) and
 * nothing else. The manifests must also hang together (binding, accounts, namespaces), and kubectl creates
 * them on the emulator.
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { PassThrough } from "node:stream";
import { promisify } from "node:util";
import * as k8s from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { afterAll, beforeAll, expect, it } from "vitest";
import { loadApiOnly } from "@/server/config/workers";
import type { WorkspaceDriver } from "@/server/workspace/drivers/driver";
import type { ApiCall } from "@/test/fixtures/kube-apiserver";
import {
  createDriverTestbed,
  describeKube,
  startEmulatorWithClients,
  type DriverTestbed,
} from "./support/kube-env";

const DEPLOY_DIR = path.resolve("deploy/kubernetes");
/** Granted beyond what the emulator sees: API servers from 1.35 check `create` on WebSocket exec too. */
const GRANTED_FOR_NEWER_SERVERS = ["pods/exec create"];

type Manifest = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [field: string]: unknown;
};
type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };

function manifests(dir = DEPLOY_DIR): Manifest[] {
  return fs
    .readdirSync(dir)
    .filter((file) => file.endsWith(".yaml"))
    .flatMap((file) =>
      parseAllDocuments(fs.readFileSync(path.join(dir, file), "utf8")).map((doc) => {
        if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
        return doc.toJS() as Manifest;
      }),
    );
}

const find = (all: Manifest[], kind: string, name: string) => {
  const found = all.find((manifest) => manifest.kind === kind && manifest.metadata.name === name);
  if (!found) throw new Error(`deploy/kubernetes has no ${kind} ${name}`);
  return found;
};

/** `resource verb` (resource prefixed with its group when it has one), as a set. */
const permissionsOf = (calls: Array<{ group: string; resource: string; verb: string }>) =>
  [
    ...new Set(calls.map((call) => `${call.group ? `${call.group}/` : ""}${call.resource} ${call.verb}`)),
  ].sort();

describeKube("deploy/kubernetes manifests", () => {
  const all = manifests();
  const role = find(all, "Role", "berth-workspaces");
  const config = find(all, "ConfigMap", "berth-config") as Manifest & { data: Record<string, string> };
  const workspaceNamespace = config.data.BERTH_K8S_NAMESPACE!;
  let bed: DriverTestbed;

  beforeAll(async () => {
    bed = await createDriverTestbed();
  });
  afterAll(async () => {
    await bed?.cleanup();
  });

  it("hang together: the binding gives Berth's account the Role where the workspaces live", () => {
    expect(role.metadata.namespace).toBe(workspaceNamespace);
    expect(all.filter((manifest) => manifest.kind.startsWith("Cluster"))).toEqual([]);
    const binding = find(all, "RoleBinding", "berth-workspaces") as Manifest & {
      roleRef: { kind: string; name: string };
      subjects: Array<{ kind: string; name: string; namespace: string }>;
    };
    expect([binding.metadata.namespace, binding.roleRef]).toEqual([
      workspaceNamespace,
      { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "berth-workspaces" },
    ]);
    const [subject] = binding.subjects;
    const account = find(all, "ServiceAccount", subject!.name);
    expect(account.metadata.namespace).toBe(subject!.namespace);
    for (const name of ["berth-api", "berth-workers"]) {
      const deployment = find(all, "Deployment", name) as Manifest & {
        spec: {
          template: { spec: { serviceAccountName: string; containers: Array<Record<string, unknown>> } };
        };
      };
      expect(deployment.metadata.namespace).toBe(subject!.namespace);
      expect(deployment.spec.template.spec.serviceAccountName).toBe(subject!.name);
      const [container] = deployment.spec.template.spec.containers;
      expect(container).toHaveProperty("readinessProbe");
      expect(container).toHaveProperty("livenessProbe");
    }
    // The API replicas run no workers (BERTH_API_ONLY, as server/config parses it); berth-workers does.
    const [api] = (
      find(all, "Deployment", "berth-api") as Manifest & {
        spec: {
          template: {
            spec: { containers: Array<{ command: string[]; env?: Array<{ name: string; value: string }> }> };
          };
        };
      }
    ).spec.template.spec.containers;
    expect(api!.command).toEqual(["npm", "start"]);
    expect(loadApiOnly(Object.fromEntries((api!.env ?? []).map((v) => [v.name, v.value])))).toBe(true);
    // Workspace Pods run as an account of their namespace that mounts no token.
    const workspaceAccount = find(all, "ServiceAccount", config.data.BERTH_K8S_SERVICE_ACCOUNT!);
    expect(workspaceAccount).toMatchObject({
      metadata: { namespace: workspaceNamespace },
      automountServiceAccountToken: false,
    });
    expect(find(all, "NetworkPolicy", "berth-workspaces-default-deny")).toMatchObject({
      metadata: { namespace: workspaceNamespace },
      spec: { podSelector: {}, policyTypes: ["Ingress", "Egress"] },
    });
    for (const namespace of [workspaceNamespace, subject!.namespace]) find(all, "Namespace", namespace);
    expect(find(manifests(path.join(DEPLOY_DIR, "optional")), "RuntimeClass", "gvisor")).toMatchObject({
      handler: "runsc",
    });
  });

  it("the Role grants every call the driver makes, and nothing more", async () => {
    const calls: ApiCall[] = [];
    /** Records the driver's requests only (the test's own inspections go unrecorded). */
    const recorded = async <T>(work: () => Promise<T>): Promise<T> => {
      const recorder = bed.emulator.recordCalls();
      try {
        return await work();
      } finally {
        calls.push(...recorder.stop());
      }
    };
    const egress = (port: number) => ({
      tenantEgress: { "tenant-k8s": [{ cidr: "10.0.0.0/8", ports: [port] }] },
    });
    const driver: WorkspaceDriver = bed.newDriver(egress(443));
    const spec = bed.specFor();

    const handle = await recorded(() => driver.create(spec));
    await recorded(async () => {
      const backend = await driver.attach(spec);
      await backend.writeFile("note.txt", "kept");
      await backend.exec(["cat", "note.txt"]);
      await driver.usage!(spec);
      await driver.connectMcp!(backend);
      await backend.close();
    });

    // The gateway dies: the next attach restarts it (its credentials Secret replaced by compare-and-swap).
    await gatewayExec(handle.pod as string, ["sh", "-c", "kill -9 $(cat /run/berth/gateway.pid)"]);
    // Another process with another tenant egress: it updates the policy.
    const other = bed.newDriver(egress(8443));
    await recorded(async () => {
      const backend = await other.attach(spec);
      await other.connectMcp!(backend);
      await backend.close();
      await other.create(spec);
    });

    // Evicted: reported from its events and replaced; a Pod that cannot be scheduled fails the provision.
    await bed.emulator.evictPod(bed.namespace, handle.pod as string);
    await recorded(() => driver.create(spec));
    const unschedulable = bed.newDriver({
      nodeSelector: { "berth.dev/no-such-node": "true" },
      pendingTimeoutMs: 1_000,
    });
    await expect(recorded(() => unschedulable.create(bed.specFor()))).rejects.toThrow(
      /FailedScheduling|schedul/,
    );

    await recorded(async () => {
      await driver.stop(spec);
      await driver.exists(spec);
      const orphan = (await driver.listResources()).find((each) => each.workspaceId === spec.workspaceId);
      await driver.create(spec);
      await driver.reap(orphan!);
      await driver.create(spec);
      await driver.purge(spec);
    });

    // A warm pool machine: made, listed, bound (its labels patched), refused a discard, purged.
    const pooled = bed.specFor();
    await recorded(async () => {
      await driver.warmPoolKey!();
      const idle = await driver.createIdleMachine!("mrbac");
      await driver.listIdleMachines!();
      const handle = await driver.bindIdleMachine!("mrbac", idle, pooled);
      await driver.discardIdleMachine!("mrbac", idle);
      await driver.purge({ ...pooled, handle });
    });

    const used = permissionsOf(calls);
    const rules = (role as Manifest & { rules: Rule[] }).rules;
    const granted = permissionsOf(
      rules.flatMap((rule) =>
        rule.apiGroups.flatMap((group) =>
          rule.resources.flatMap((resource) => rule.verbs.map((verb) => ({ group, resource, verb }))),
        ),
      ),
    );
    expect(calls.every((call) => call.namespace === bed.namespace)).toBe(true);
    expect(granted).toEqual([...new Set([...used, ...GRANTED_FOR_NEWER_SERVERS])].sort());
  });

  // Skipped, with the reason printed, on a developer machine without kubectl; CI (.ci/run) installs it,
  // so there a missing kubectl fails this case instead of hiding it.
  it.skipIf(!kubectlPath() && !process.env.CI)("kubectl creates them on the emulator", async () => {
    if (!kubectlPath()) throw new Error("kubectl is missing: .ci/run installs it (Debian kubernetes-client)");
    const cluster = await startEmulatorWithClients({ namespace: "default" });
    try {
      const kubectl = (...args: string[]) =>
        promisify(execFile)(kubectlPath()!, ["--kubeconfig", cluster.emulator.kubeconfigPath, ...args]);
      const created = await kubectl("create", "--validate=false", "-f", DEPLOY_DIR, "-o", "name");
      expect(created.stdout.split("\n").filter(Boolean).sort()).toEqual(
        all
          .map((manifest) => {
            // kubectl's `-o name`: kind, qualified by its API group when it has one.
            const group = manifest.apiVersion.includes("/") ? `.${manifest.apiVersion.split("/")[0]}` : "";
            return `${manifest.kind.toLowerCase()}${group}/${manifest.metadata.name}`;
          })
          .sort(),
      );
      const rbac = cluster.kc.makeApiClient(k8s.RbacAuthorizationV1Api);
      const stored = await rbac.readNamespacedRole({
        namespace: workspaceNamespace,
        name: "berth-workspaces",
      });
      expect(stored.rules).toEqual((role as Manifest & { rules: Rule[] }).rules);
      const policy = await cluster.networking.readNamespacedNetworkPolicy({
        namespace: workspaceNamespace,
        name: "berth-workspaces-default-deny",
      });
      expect(policy.spec?.policyTypes).toEqual(["Ingress", "Egress"]);
    } finally {
      await cluster.emulator.close();
    }
  });

  /** Runs a command in a Pod's gateway container with client-node's own Exec. */
  async function gatewayExec(pod: string, command: string[]) {
    await new Promise<void>((resolve, reject) => {
      new k8s.Exec(bed.kc)
        .exec(bed.namespace, pod, "gateway", command, new PassThrough().resume(), null, null, false, () =>
          resolve(),
        )
        .catch(reject);
    });
  }
});

if (!kubectlPath() && !process.env.CI) {
  console.warn("kubectl is not installed: skipping the kubectl create of deploy/kubernetes");
}

function kubectlPath(): string | null {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    const candidate = path.join(dir, "kubectl");
    if (fs.existsSync(candidate)) return candidate;
  }
  return null;
}
