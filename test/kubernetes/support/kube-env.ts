import { randomBytes } from "node:crypto";
import * as k8s from "@kubernetes/client-node";
import { dockerSkipReason, describeDocker, BASE_IMAGE } from "@/test/docker/support/docker-env";
import {
  startKubeEmulator,
  type KubeEmulator,
  type KubeEmulatorOptions,
} from "@/test/fixtures/kube-apiserver";

/**
 * The Kubernetes suites need what the Docker suites need (the emulator realises Pods as Docker containers of
 * the base image): they run when the engine and image are there, FAIL in CI when not, and are skipped with
 * the reason printed elsewhere (test/docker/support/docker-env.ts decides).
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
