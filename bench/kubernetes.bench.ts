import { randomBytes } from "node:crypto";
import os from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import * as k8s from "@kubernetes/client-node";
import Docker from "dockerode";
import {
  instantiateDriver,
  type WorkspaceDriver,
  type WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import { kubernetesDriver } from "@/server/workspace/drivers/kubernetes/driver";
import { IsolationPolicy } from "@/server/workspace/manager/isolation";
import { startKubeEmulator, type KubeEmulator } from "@/test/fixtures/kube-apiserver";
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
const BASE_IMAGE = process.env.BERTH_BASE_IMAGE ?? "berth-base:bookworm";
const ROUNDS = 3;

export async function run(): Promise<BenchResult[]> {
  try {
    await new Docker({ socketPath: "/var/run/docker.sock" }).getImage(BASE_IMAGE).inspect();
  } catch (error) {
    process.stdout.write(`  skipped: no Docker engine or ${BASE_IMAGE} (${String(error)})\n`);
    return [];
  }
  const emulator = await startKubeEmulator({ namespace: `berth-bench-${randomBytes(3).toString("hex")}` });
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(emulator.kubeconfigPath);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const drivers: WorkspaceDriver[] = [];
  const newDriver = () => {
    const config = kubernetesDriver.configSchema.parse({
      connection: { source: "kubeconfig", path: emulator.kubeconfigPath },
      image: BASE_IMAGE,
      terminationGracePeriodSeconds: 1,
      tunnelDir: path.join("/tmp", `berth-bench-k8s-${randomBytes(3).toString("hex")}`),
    });
    const driver = instantiateDriver(kubernetesDriver, config, {
      basedir: path.join(os.tmpdir(), "unused-basedir"),
      cwd: process.cwd(),
      uid: process.getuid?.() ?? -1,
      installationId: () => Promise.resolve("bench-kubernetes"),
    });
    drivers.push(driver);
    return driver;
  };
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
  try {
    // The gateway bundle, the namespace's policies and the image's first container outside the timings.
    const warm = newDriver();
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
    for (const spec of specs) await drivers[0]?.purge(spec).catch(() => undefined);
    for (const driver of drivers) await driver.close?.();
    await emulator.close();
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
