import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import * as k8s from "@kubernetes/client-node";
import {
  instantiateDriver,
  type WorkspaceDriver,
  type WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import { kubernetesDriver } from "@/server/workspace/drivers/kubernetes/driver";
import type { KubernetesDriverConfigInput } from "@/server/workspace/drivers/kubernetes/kubernetes-config";
import { IsolationPolicy } from "@/server/workspace/manager/isolation";
import { dockerSkipReason, describeDocker, BASE_IMAGE } from "@/test/drivers/docker/support/docker-env";
import {
  startKubeEmulator,
  type KubeEmulator,
  type KubeEmulatorOptions,
} from "@/test/fixtures/kube-apiserver";

/**
 * The Kubernetes suites need what the Docker suites need (the emulator realises Pods as Docker containers of
 * the base image): they run when the engine and image are there, FAIL in CI when not, and are skipped with
 * the reason printed elsewhere (test/drivers/docker/support/docker-env.ts decides).
 */
export const describeKube = describeDocker;
export const kubeSkipReason = dockerSkipReason;
export { BASE_IMAGE };

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString("hex")}`;
}

/** An emulator plus client-node clients loaded from its kubeconfig file, as an operator's tooling would. */
export async function startEmulatorWithClients(options: KubeEmulatorOptions = {}) {
  const emulator: KubeEmulator = await startKubeEmulator({ namespace: uniqueName("berth-test"), ...options });
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(emulator.kubeconfigPath);
  return {
    emulator,
    kc,
    core: kc.makeApiClient(k8s.CoreV1Api),
    networking: kc.makeApiClient(k8s.NetworkingV1Api),
    namespace: emulator.namespace,
  };
}

/** Polls `probe` until it returns a value (not undefined) or the deadline passes. */
export async function eventually<T>(
  probe: () => Promise<T | undefined>,
  timeoutMs = 30_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let delay = 20;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastError instanceof Error ? `: ${lastError.message}` : ""}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 250);
  }
}

export type DriverTestbed = Awaited<ReturnType<typeof createDriverTestbed>>;

/**
 * An emulator plus a factory of Kubernetes drivers configured against it (each driver is what one Berth
 * process would build at boot). `cleanup` purges every workspace the specs named and closes everything.
 */
/** The gateway start bound the kubernetes tests give the driver (BERTH_K8S_GATEWAY_START_TIMEOUT_MS). */
export const GATEWAY_START_TIMEOUT_MS = 120_000;

export async function createDriverTestbed(
  options: KubeEmulatorOptions = {},
  overrides: Partial<KubernetesDriverConfigInput> = {},
) {
  const started = await startEmulatorWithClients(options);
  const { emulator } = started;
  const tunnelDir = path.join("/tmp", `berth-k8s-${randomBytes(3).toString("hex")}`);
  const drivers: WorkspaceDriver[] = [];
  const specs: WorkspaceSpec[] = [];
  const context = {
    basedir: path.join(os.tmpdir(), "unused-basedir"),
    cwd: process.cwd(),
    uid: process.getuid?.() ?? -1,
    // One installation per test process: its objects are the only ones it lists and reaps.
    installationId: () => Promise.resolve("test-kubernetes"),
  };
  /** `installationId`: another installation's process (default: this test process' installation). */
  const newDriver = (extra: Partial<KubernetesDriverConfigInput> = {}, installationId?: string) => {
    const config = kubernetesDriver.configSchema.parse({
      connection: { source: "kubeconfig", path: emulator.kubeconfigPath },
      image: BASE_IMAGE,
      pendingTimeoutMs: 30_000,
      deleteTimeoutMs: 60_000,
      // The emulator answers a GET in milliseconds: with the default 1 s cap on the backoff, every Pod start
      // and deletion was seen about half a second late (measured 0.3-0.8 s each).
      pollIntervalMs: 200,
      terminationGracePeriodSeconds: 1,
      limits: { cpu: "1", memory: "768Mi" },
      tunnelDir,
      // A 2-core machine running npm test's four streams has taken over the default 30 s to start a gateway
      // in a Pod (its log said it listened; the health answer came later).
      gateway: { startTimeoutMs: GATEWAY_START_TIMEOUT_MS },
      ...overrides,
      ...extra,
    });
    const driver = instantiateDriver(
      kubernetesDriver,
      config,
      installationId ? { ...context, installationId: () => Promise.resolve(installationId) } : context,
    );
    drivers.push(driver);
    return driver;
  };
  const specFor = (workspaceId = `w${randomBytes(6).toString("hex")}`): WorkspaceSpec => {
    const spec = {
      workspaceId,
      tenantId: "tenant-k8s",
      userId: "user-k8s",
      agentId: "agent-k8s",
      isolation: IsolationPolicy.PER_AGENT,
    };
    specs.push(spec);
    return spec;
  };
  const cleanup = async () => {
    const purger = drivers[0];
    for (const spec of specs) await purger?.purge(spec).catch(() => undefined);
    for (const driver of drivers) await driver.close?.();
    await emulator.close();
    await fs.rm(tunnelDir, { recursive: true, force: true });
  };
  return { ...started, newDriver, specFor, cleanup };
}
