import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Docker from "dockerode";
import { instantiateDriver, type WorkspaceDriver } from "@/server/workspace/drivers/driver";
import { e2bDriver } from "@/server/workspace/drivers/e2b/driver";
import { ZE2bDriverConfig } from "@/server/workspace/drivers/e2b/e2b-config";
import { kubernetesDriver } from "@/server/workspace/drivers/kubernetes/driver";
import { startE2bEmulator, type E2bEmulator } from "@/test/fixtures/e2b-emulator/e2b-emulator";
import { startKubeEmulator, type KubeEmulator } from "@/test/fixtures/kube-apiserver";

/**
 * The Kubernetes and E2B drivers as the benches build them: each against its loopback emulator (test
 * fixtures whose Pods and sandboxes are local Docker containers of the base image), through the official
 * SDKs. What they measure is Berth's protocol overhead, never a cluster's or E2B's cloud latencies.
 * Shared by kubernetes.bench.ts, e2b.bench.ts and warm-pool.bench.ts.
 */
export const BASE_IMAGE = process.env.BERTH_BASE_IMAGE ?? "berth-base:bookworm";
const DOCKER_SOCKET = process.env.DOCKER_SOCKET ?? "/var/run/docker.sock";

/** An emulator and the drivers made against it; `close` closes those drivers, then the emulator. */
export type Emulated<E> = { emulator: E; newDriver: () => WorkspaceDriver; close: () => Promise<void> };

/**
 * Why containers of the base image cannot run here (no engine, or no image), else null: both emulators'
 * machines are such containers, as the Docker driver's are.
 */
export async function containersUnavailable(): Promise<string | null> {
  try {
    const docker = new Docker({ socketPath: DOCKER_SOCKET });
    await docker.ping();
    await docker.getImage(BASE_IMAGE).inspect();
    return null;
  } catch (error) {
    return `no Docker engine or ${BASE_IMAGE} (${String(error)})`;
  }
}

/** The kube-apiserver emulator in a namespace of its own, and Kubernetes drivers of one installation. */
export async function startKubernetes(installation: string): Promise<Emulated<KubeEmulator>> {
  const emulator = await startKubeEmulator({ namespace: `berth-bench-${randomBytes(3).toString("hex")}` });
  const drivers: WorkspaceDriver[] = [];
  const tunnelDirs: string[] = [];
  const newDriver = () => {
    // Short and under /tmp: the tunnels' unix socket paths are limited to 107 bytes.
    const tunnelDir = path.join("/tmp", `berth-bench-k8s-${randomBytes(3).toString("hex")}`);
    tunnelDirs.push(tunnelDir);
    const config = kubernetesDriver.configSchema.parse({
      connection: { source: "kubeconfig", path: emulator.kubeconfigPath },
      image: BASE_IMAGE,
      terminationGracePeriodSeconds: 1,
      tunnelDir,
    });
    const driver = instantiateDriver(kubernetesDriver, config, {
      basedir: path.join(os.tmpdir(), "unused-basedir"),
      cwd: process.cwd(),
      uid: process.getuid?.() ?? -1,
      installationId: () => Promise.resolve(installation),
    });
    drivers.push(driver);
    return driver;
  };
  return { emulator, newDriver, close: closing(drivers, emulator, tunnelDirs) };
}

/** The E2B emulator (template `base` of the base image), and E2B drivers of one installation. */
export async function startE2b(installation: string): Promise<Emulated<E2bEmulator>> {
  const emulator = await startE2bEmulator({ templates: { base: { image: BASE_IMAGE } } });
  const basedir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-bench-e2b-"));
  const drivers: WorkspaceDriver[] = [];
  const newDriver = () => {
    const context = { basedir, cwd: process.cwd(), uid: process.getuid?.() ?? -1 };
    const env = {
      E2B_API_KEY: emulator.apiKey,
      E2B_DOMAIN: emulator.domain,
      BERTH_E2B_API_URL: emulator.url,
      BERTH_E2B_SANDBOX_URL: emulator.url,
      BERTH_E2B_INSTALLATION: installation,
    };
    const config = ZE2bDriverConfig.parse(e2bDriver.configFromEnv(env, context));
    const driver = instantiateDriver(e2bDriver, config, context);
    drivers.push(driver);
    return driver;
  };
  return { emulator, newDriver, close: closing(drivers, emulator, [basedir]) };
}

/** The drivers closed, then the emulator (every machine it made goes with it), then the drivers' folders. */
function closing(drivers: WorkspaceDriver[], emulator: { close(): Promise<void> }, folders: string[]) {
  return async () => {
    for (const driver of drivers) await driver.close?.();
    await emulator.close();
    for (const folder of folders) await fs.rm(folder, { recursive: true, force: true });
  };
}
