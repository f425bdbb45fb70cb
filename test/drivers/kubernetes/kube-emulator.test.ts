import { execFile, execFileSync } from "node:child_process";
import { PassThrough, Readable, Writable } from "node:stream";
import { promisify } from "node:util";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { KubeEmulator } from "@/test/fixtures/kube-apiserver";
import { BASE_IMAGE, describeKube, eventually, startEmulatorWithClients } from "./support/kube-env";

const run = promisify(execFile);

/** kubectl is a second, independent client: its test is skipped (with the reason printed) where it is absent. */
const kubectlMissing = (() => {
  try {
    execFileSync("kubectl", ["version", "--client"], { stdio: "ignore", timeout: 30_000 });
    return null;
  } catch (error) {
    return `kubectl is not runnable here (${error instanceof Error ? error.message : "unknown error"})`;
  }
})();
if (kubectlMissing) console.warn(`[kube-emulator tests] kubectl test SKIPPED: ${kubectlMissing}`);

function collector() {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      callback();
    },
  });
  return { stream, text: () => Buffer.concat(chunks).toString("utf8") };
}

/** client-node's own Exec, waiting for the status frame (its promise resolves when the socket opens). */
async function clientExec(
  kc: k8s.KubeConfig,
  namespace: string,
  pod: string,
  command: string[],
  stdin?: string,
) {
  const out = collector();
  const err = collector();
  let protocol = "";
  const status = await new Promise<k8s.V1Status>((resolve, reject) => {
    new k8s.Exec(kc)
      .exec(
        namespace,
        pod,
        "main",
        command,
        out.stream,
        err.stream,
        stdin === undefined ? null : Readable.from([Buffer.from(stdin)]),
        false,
        resolve,
      )
      .then((ws) => {
        protocol = ws.protocol;
      }, reject);
  });
  const exitCode =
    status.status === "Success"
      ? 0
      : Number(status.details?.causes?.find((cause) => cause.reason === "ExitCode")?.message);
  return { stdout: out.text(), stderr: err.text(), exitCode, protocol };
}

const apiErrorOf = async (promise: Promise<unknown>) => {
  const error = (await promise.then(
    () => null,
    (caught: unknown) => caught,
  )) as k8s.ApiException<string> | null;
  if (!error) throw new Error("expected the call to fail");
  if (error.body === undefined) throw error;
  return {
    code: error.code,
    body: JSON.parse(error.body) as { kind: string; reason: string; message: string; code: number },
  };
};

describeKube("loopback Kubernetes API server emulator, driven by client-node and kubectl", () => {
  let emulator: KubeEmulator;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  let networking: k8s.NetworkingV1Api;
  let namespace: string;

  const podBody = (name: string, claim: string, extra: Partial<k8s.V1PodSpec> = {}): k8s.V1Pod => ({
    metadata: { name, labels: { app: "emu-test", tier: name.startsWith("keep") ? "keep" : "other" } },
    spec: {
      restartPolicy: "Never",
      terminationGracePeriodSeconds: 1,
      securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, runAsNonRoot: true },
      containers: [
        {
          name: "main",
          image: BASE_IMAGE,
          command: ["sleep", "infinity"],
          volumeMounts: [{ name: "data", mountPath: "/data" }],
          securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true },
        },
      ],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }],
      ...extra,
    },
  });
  const claimBody = (name: string): k8s.V1PersistentVolumeClaim => ({
    metadata: { name, labels: { app: "emu-test" } },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
  });
  const running = (name: string) =>
    eventually(
      async () => {
        const pod = await core.readNamespacedPod({ namespace, name });
        return pod.status?.phase === "Running" ? pod : undefined;
      },
      60_000,
      `pod ${name} running`,
    );

  beforeAll(async () => {
    ({ emulator, kc, core, networking, namespace } = await startEmulatorWithClients());
  });
  afterAll(async () => {
    await emulator?.close();
  });

  it("answers REST calls in Kubernetes' shapes: create, get, list by labels, Status errors", async () => {
    const claim = await core.createNamespacedPersistentVolumeClaim({
      namespace,
      body: claimBody("keep-data"),
    });
    expect(claim.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(claim.metadata?.finalizers).toContain("kubernetes.io/pvc-protection");
    const bound = await eventually(async () => {
      const read = await core.readNamespacedPersistentVolumeClaim({ namespace, name: "keep-data" });
      return read.status?.phase === "Bound" ? read : undefined;
    });
    expect(bound.spec?.storageClassName).toBe("standard");

    const created = await core.createNamespacedPod({ namespace, body: podBody("keep-1", "keep-data") });
    expect(created.status?.phase).toBe("Pending");
    const duplicate = await apiErrorOf(
      core.createNamespacedPod({ namespace, body: podBody("keep-1", "keep-data") }),
    );
    expect(duplicate).toMatchObject({
      code: 409,
      body: { kind: "Status", reason: "AlreadyExists", message: 'pods "keep-1" already exists' },
    });

    const pod = await running("keep-1");
    expect(pod.spec?.nodeName).toBe("kube-emulator-node");
    expect(pod.status?.containerStatuses?.[0]).toMatchObject({
      name: "main",
      ready: true,
      state: { running: {} },
    });
    expect(Number(pod.metadata?.resourceVersion)).toBeGreaterThan(Number(created.metadata?.resourceVersion));

    await core.createNamespacedPod({ namespace, body: podBody("other-1", "keep-data") });
    const byEquality = await core.listNamespacedPod({ namespace, labelSelector: "app=emu-test,tier=keep" });
    expect(byEquality.items.map((item) => item.metadata?.name)).toEqual(["keep-1"]);
    const bySet = await core.listNamespacedPod({
      namespace,
      labelSelector: "tier in (keep,other),app!=nope",
    });
    expect(bySet.items.map((item) => item.metadata?.name)).toEqual(["keep-1", "other-1"]);
    const byField = await core.listNamespacedPod({ namespace, fieldSelector: "metadata.name=other-1" });
    expect(byField.items.map((item) => item.metadata?.name)).toEqual(["other-1"]);
    const page = await core.listNamespacedPod({ namespace, limit: 1 });
    expect(page.items).toHaveLength(1);
    expect(page.metadata?._continue).toBeTruthy();

    expect(await apiErrorOf(core.readNamespacedPod({ namespace, name: "missing" }))).toMatchObject({
      code: 404,
      body: { reason: "NotFound", message: 'pods "missing" not found' },
    });
    expect(
      await apiErrorOf(core.createNamespacedPod({ namespace, body: podBody("Bad_Name", "keep-data") })),
    ).toMatchObject({
      code: 422,
      body: { reason: "Invalid" },
    });
    expect(
      await apiErrorOf(core.createNamespacedPod({ namespace: "no-such-ns", body: podBody("x", "y") })),
    ).toMatchObject({
      code: 404,
      body: { message: 'namespaces "no-such-ns" not found' },
    });
    expect(await apiErrorOf(core.listNamespacedPod({ namespace, labelSelector: "a in (b" }))).toMatchObject({
      code: 400,
    });

    const conflict = await apiErrorOf(
      core.replaceNamespacedPersistentVolumeClaim({
        namespace,
        name: "keep-data",
        body: { ...bound, metadata: { ...bound.metadata, resourceVersion: "1" } },
      }),
    );
    expect(conflict).toMatchObject({ code: 409, body: { reason: "Conflict" } });

    const anonymous = new k8s.KubeConfig();
    anonymous.loadFromClusterAndUser(kc.getCurrentCluster()!, { name: "intruder", token: "wrong" });
    // client-node maps a documented 401 to an ApiException without body: only the code is there to check.
    const refused = await anonymous
      .makeApiClient(k8s.CoreV1Api)
      .listNamespacedPod({ namespace })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 401 });
  });

  it("runs exec over WebSocket v5: stdout, stderr, exit code from the status channel, stdin half-closed", async () => {
    const result = await clientExec(kc, namespace, "keep-1", [
      "sh",
      "-c",
      "echo out; echo err >&2; id -u; exit 3",
    ]);
    expect(result).toMatchObject({
      stdout: "out\n1000\n",
      stderr: "err\n",
      exitCode: 3,
      protocol: "v5.channel.k8s.io",
    });
    // Only v5 lets the client half-close stdin: `tr` sees EOF and exits on its own.
    const piped = await clientExec(kc, namespace, "keep-1", ["tr", "a-z", "A-Z"], "hello through stdin\n");
    expect(piped).toMatchObject({ stdout: "HELLO THROUGH STDIN\n", exitCode: 0 });
    // The security context is applied: non-root, read-only root filesystem, claim writable through fsGroup.
    const confined = await clientExec(kc, namespace, "keep-1", [
      "sh",
      "-c",
      "touch /etc/x 2>/dev/null || echo ro; echo kept > /data/file; cat /data/file",
    ]);
    expect(confined.stdout).toBe("ro\nkept\n");

    // The resource metrics API, read by client-node's own Metrics client (what `kubectl top pods` asks):
    // a PodMetrics per running Pod, usage in Kubernetes quantities.
    const metrics = await new k8s.Metrics(kc).getPodMetrics(namespace);
    const keep = metrics.items.find((item) => item.metadata.name === "keep-1");
    expect(keep).toMatchObject({ window: expect.stringMatching(/^[\d.]+s$/) });
    expect(keep!.containers[0]!.usage).toMatchObject({
      cpu: expect.stringMatching(/^\d+n$/),
      memory: expect.stringMatching(/^[1-9]\d*Ki$/),
    });
  });

  it("keeps a claim's data across Pod deletion and protects a claim in use", async () => {
    const deleted = await core.deleteNamespacedPod({ namespace, name: "keep-1" });
    expect(deleted.metadata?.deletionTimestamp).toBeTruthy();
    const claimDelete = core.deleteNamespacedPersistentVolumeClaim({ namespace, name: "keep-data" });
    await claimDelete;
    await core.deleteNamespacedPod({ namespace, name: "other-1", gracePeriodSeconds: 0 });
    await eventually(
      async () => {
        const error = await apiErrorOf(core.readNamespacedPod({ namespace, name: "keep-1" })).catch(
          () => null,
        );
        return error?.code === 404 ? true : undefined;
      },
      30_000,
      "keep-1 gone",
    );
    // The claim went with its last user (pvc-protection) and a new claim of the same name is a new volume.
    await eventually(
      async () => {
        const error = await apiErrorOf(
          core.readNamespacedPersistentVolumeClaim({ namespace, name: "keep-data" }),
        ).catch(() => null);
        return error?.code === 404 ? true : undefined;
      },
      30_000,
      "claim gone",
    );

    await core.createNamespacedPersistentVolumeClaim({ namespace, body: claimBody("survivor") });
    await core.createNamespacedPod({ namespace, body: podBody("keep-2", "survivor") });
    await running("keep-2");
    await clientExec(kc, namespace, "keep-2", ["sh", "-c", "echo persisted > /data/f"]);
    await core.deleteNamespacedPod({ namespace, name: "keep-2", gracePeriodSeconds: 0 });
    await eventually(async () =>
      (await core.listNamespacedPod({ namespace, labelSelector: "tier=keep" })).items.length === 0
        ? true
        : undefined,
    );
    await core.createNamespacedPod({ namespace, body: podBody("keep-2", "survivor") });
    await running("keep-2");
    expect((await clientExec(kc, namespace, "keep-2", ["cat", "/data/f"])).stdout).toBe("persisted\n");
  });

  it("streams watch events and records the kubelet's Events", async () => {
    const seen: string[] = [];
    const controller = await new k8s.Watch(kc).watch(
      `/api/v1/namespaces/${namespace}/pods`,
      { labelSelector: "app=emu-test,tier=other" },
      (type, object: k8s.V1Pod) =>
        seen.push(
          `${type}:${object.status?.phase ?? ""}${object.metadata?.deletionTimestamp ? ":deleting" : ""}`,
        ),
      () => undefined,
    );
    await core.createNamespacedPod({ namespace, body: podBody("other-2", "survivor") });
    await running("other-2");
    await core.deleteNamespacedPod({ namespace, name: "other-2" });
    await eventually(
      () => Promise.resolve(seen.some((entry) => entry.startsWith("DELETED")) ? true : undefined),
      30_000,
      "DELETED event",
    );
    controller.abort();
    expect(seen[0]).toBe("ADDED:Pending");
    expect(seen).toContain("MODIFIED:Running");
    expect(seen).toContain("MODIFIED:Running:deleting");

    const events = await core.listNamespacedEvent({
      namespace,
      fieldSelector: "involvedObject.name=other-2,involvedObject.kind=Pod",
    });
    expect(events.items.map((event) => event.reason)).toEqual(
      expect.arrayContaining(["Scheduled", "Pulled", "Created", "Started", "Killing"]),
    );
  });

  it("reports unschedulable Pods, evictions and OOM kills in status and events", async () => {
    await core.createNamespacedPod({
      namespace,
      body: podBody("other-pending", "survivor", { nodeSelector: { disktype: "ssd" } }),
    });
    const pending = await eventually(async () => {
      const pod = await core.readNamespacedPod({ namespace, name: "other-pending" });
      return pod.status?.conditions?.find((condition) => condition.reason === "Unschedulable")
        ? pod
        : undefined;
    });
    expect(pending.status?.phase).toBe("Pending");
    const scheduling = await core.listNamespacedEvent({
      namespace,
      fieldSelector: "involvedObject.name=other-pending,reason=FailedScheduling",
    });
    expect(scheduling.items[0]?.message).toContain("didn't match Pod's node affinity/selector");

    await emulator.evictPod(namespace, "keep-2");
    const evicted = await core.readNamespacedPod({ namespace, name: "keep-2" });
    expect(evicted.status).toMatchObject({ phase: "Failed", reason: "Evicted" });
    const evictions = await core.listNamespacedEvent({
      namespace,
      fieldSelector: "involvedObject.name=keep-2,reason=Evicted",
    });
    expect(evictions.items).toHaveLength(1);

    await core.createNamespacedPod({ namespace, body: podBody("other-oom", "survivor") });
    await running("other-oom");
    await emulator.oomKillPod(namespace, "other-oom");
    const killed = await eventually(async () => {
      const pod = await core.readNamespacedPod({ namespace, name: "other-oom" });
      return pod.status?.containerStatuses?.[0]?.state?.terminated ? pod : undefined;
    });
    expect(killed.status?.phase).toBe("Failed");
    expect(killed.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
      reason: "OOMKilled",
      exitCode: 137,
    });
  });

  it("stores NetworkPolicies and Secrets with the generic REST semantics", async () => {
    const policy = await networking.createNamespacedNetworkPolicy({
      namespace,
      body: {
        metadata: { name: "deny-egress", labels: { app: "emu-test" } },
        spec: { podSelector: {}, policyTypes: ["Egress"] },
      },
    });
    expect(policy.apiVersion).toBe("networking.k8s.io/v1");
    const listed = await networking.listNamespacedNetworkPolicy({ namespace, labelSelector: "app=emu-test" });
    expect(listed.items.map((item) => item.spec?.policyTypes)).toEqual([["Egress"]]);
    const status = await networking.deleteNamespacedNetworkPolicy({ namespace, name: "deny-egress" });
    expect(status).toMatchObject({ status: "Success" });
    expect(
      await apiErrorOf(networking.readNamespacedNetworkPolicy({ namespace, name: "deny-egress" })),
    ).toMatchObject({
      code: 404,
      body: { message: 'networkpolicies.networking.k8s.io "deny-egress" not found' },
    });

    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: "s1" },
        stringData: { a: "b" },
        data: { token: Buffer.from("t0k3n").toString("base64") },
      },
    });
    const secret = await core.readNamespacedSecret({ namespace, name: "s1" });
    expect(Buffer.from(secret.data!.token!, "base64").toString()).toBe("t0k3n");
    const patched = await core.patchNamespacedSecret({
      namespace,
      name: "s1",
      body: [{ op: "replace", path: "/data/token", value: Buffer.from("n3w").toString("base64") }],
    });
    expect(Buffer.from(patched.data!.token!, "base64").toString()).toBe("n3w");
  });

  it.skipIf(kubectlMissing !== null)(
    "serves kubectl: discovery, get pods (server-side table) and exec",
    async () => {
      const kubectl = (...args: string[]) =>
        run("kubectl", ["--kubeconfig", emulator.kubeconfigPath, ...args], { timeout: 60_000 });
      const version = await kubectl("version", "-o", "json");
      expect(JSON.parse(version.stdout).serverVersion.gitVersion).toContain("kube-emulator");
      await core.createNamespacedPod({ namespace, body: podBody("keep-kubectl", "survivor") });
      await running("keep-kubectl");
      const pods = await kubectl("get", "pods", "-l", "tier=keep");
      expect(pods.stdout).toMatch(/keep-kubectl\s+1\/1\s+Running/);
      const json = JSON.parse((await kubectl("get", "pod", "keep-kubectl", "-o", "json")).stdout);
      expect(json.status.phase).toBe("Running");

      const exec = await kubectl(
        "exec",
        "keep-kubectl",
        "-c",
        "main",
        "--",
        "sh",
        "-c",
        "echo from-kubectl; echo e >&2",
      );
      expect(exec.stdout).toBe("from-kubectl\n");
      const failed = await kubectl("exec", "keep-kubectl", "--", "sh", "-c", "exit 7").then(
        () => null,
        (error: { code?: number }) => error,
      );
      expect(failed?.code).toBe(7);
      const child = execFile("kubectl", [
        "--kubeconfig",
        emulator.kubeconfigPath,
        "exec",
        "-i",
        "keep-kubectl",
        "--",
        "wc",
        "-c",
      ]);
      const input = new PassThrough();
      input.pipe(child.stdin!);
      input.end("12345");
      const output = await new Promise<string>((resolve, reject) => {
        let text = "";
        child.stdout!.on("data", (chunk: Buffer) => (text += chunk.toString()));
        child.on("exit", (code) =>
          code === 0 ? resolve(text) : reject(new Error(`kubectl exec -i exited ${code}`)),
        );
      });
      expect(output.trim()).toBe("5");
    },
  );
});
