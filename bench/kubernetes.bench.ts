import { randomBytes } from "node:crypto";
import { PassThrough } from "node:stream";
import * as k8s from "@kubernetes/client-node";
import { type WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { IsolationPolicy } from "@/server/workspace/manager/isolation";
import { type KubeEmulator } from "@/test/fixtures/kube-apiserver";
import { BASE_IMAGE, containersUnavailable, startKubernetes } from "./emulated-drivers";
import { median, result, type BenchResult } from "./lib";

/**
 * Kubernetes workspaces against the loopback kube-apiserver emulator (Pods are Docker containers). The
 * figures are PROTOCOL OVERHEAD ONLY: no scheduler, image pull or volume attach of a real cluster is in
 * them, only what Berth's driver adds over the plainest client-node use of the same API server, measured in
 * the same run:
 * - cold create → first command (claim, Pod with two containers, policies, gateway started over exec) vs a
 *   bare one-container Pod created, polled until Running and exec'd once with client-node;
 * - reattach → first command (a new driver, as a restarted process: reads the Pod and the gateway's
 *   credentials, opens its tunnel) vs one bare client-node exec into a running Pod.
 * Skipped, with the reason printed, when no Docker engine or base image is available.
 */
const ROUNDS = 3;

export async function run(): Promise<BenchResult[]> {
  const unavailable = await containersUnavailable();
  if (unavailable) {
    process.stdout.write(`  skipped: ${unavailable}\n`);
    return [];
  }
  const kubernetes = await startKubernetes("bench-kubernetes");
  const { emulator, newDriver } = kubernetes;
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(emulator.kubeconfigPath);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const specs: WorkspaceSpec[] = [];
  const specFor = (): WorkspaceSpec => {
    const spec = {
      workspaceId: `b${randomBytes(6).toString("hex")}`,
      tenantId: "bench",
      userId: "bench",
      agentId: "bench",
      isolation: IsolationPolicy.PER_AGENT,
    };
    specs.push(spec);
    return spec;
  };
  // The gateway bundle, the namespace's policies and the image's first container outside the timings.
  const warm = newDriver();
  try {
    await warm.create(specFor());
    await barePodFirstCommand(emulator, core, kc);

    const bareColdMs: number[] = [];
    const coldMs: number[] = [];
    const bareExecMs: number[] = [];
    const reattachMs: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      bareColdMs.push(await barePodFirstCommand(emulator, core, kc));

      const spec = specFor();
      let start = performance.now();
      const driver = newDriver();
      await driver.create(spec);
      const backend = await driver.attach(spec);
      await backend.exec(["true"]);
      coldMs.push(performance.now() - start);
      await backend.close();

      const pod = (
        await core.listNamespacedPod({
          namespace: emulator.namespace,
          labelSelector: `berth.dev/workspace=${spec.workspaceId}`,
        })
      ).items[0]!.metadata!.name!;
      start = performance.now();
      await execTrue(kc, emulator.namespace, pod, "workspace");
      bareExecMs.push(performance.now() - start);

      start = performance.now();
      const restarted = newDriver();
      const attached = await restarted.attach(spec);
      await attached.exec(["true"]);
      reattachMs.push(performance.now() - start);
      await attached.close();
    }
    return [
      result({
        name: "kubernetes (emulator, protocol overhead only): cold create → first command",
        value: median(coldMs),
        unit: "ms",
        baseline: "bare one-container Pod: create, poll until Running, one exec (client-node)",
        baselineValue: median(bareColdMs),
      }),
      result({
        name: "kubernetes (emulator, protocol overhead only): reattach → first command",
        value: median(reattachMs),
        unit: "ms",
        baseline: "one bare client-node exec into the running Pod",
        baselineValue: median(bareExecMs),
      }),
    ];
  } finally {
    for (const spec of specs) await warm.purge(spec).catch(() => undefined);
    await kubernetes.close();
  }
}

/** Milliseconds from creating a bare Pod to its first command's end; the Pod is deleted afterwards. */
async function barePodFirstCommand(emulator: KubeEmulator, core: k8s.CoreV1Api, kc: k8s.KubeConfig) {
  const namespace = emulator.namespace;
  const name = `bare-${randomBytes(4).toString("hex")}`;
  const start = performance.now();
  await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name },
      spec: {
        restartPolicy: "Never",
        containers: [{ name: "main", image: BASE_IMAGE, command: ["sleep", "infinity"] }],
      },
    },
  });
  for (let delay = 25; ; delay = Math.min(delay * 2, 1_000)) {
    const pod = await core.readNamespacedPod({ namespace, name });
    if (pod.status?.phase === "Running") break;
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
  await execTrue(kc, namespace, name, "main");
  const elapsed = performance.now() - start;
  await core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
  return elapsed;
}

function execTrue(kc: k8s.KubeConfig, namespace: string, pod: string, container: string) {
  return new Promise<void>((resolve, reject) => {
    new k8s.Exec(kc)
      .exec(namespace, pod, container, ["true"], new PassThrough().resume(), null, null, false, () =>
        resolve(),
      )
      .catch(reject);
  });
}
