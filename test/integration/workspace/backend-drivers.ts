import { instantiateDriver, type WorkspaceDriver } from "@/server/workspace/drivers/driver";
import { dockerDriver } from "@/server/workspace/drivers/docker/driver";
import { BASE_IMAGE, SOCKET_PATH, testInstallationId } from "../../drivers/docker/support/docker-env";
import { createDriverTestbed as createE2bTestbed } from "../../drivers/e2b/support/e2b-driver-env";
import { createDriverTestbed as createKubeTestbed } from "../../drivers/kubernetes/support/kube-env";

/**
 * The drivers an integration harness adds beside its counted `local` one (startWorkspaceHarness's
 * `moreDrivers`): real Docker, and the E2B and Kubernetes drivers over their loopback emulators (whose
 * sandboxes and Pods are containers of the base image). One place, so suites that mix backends build them
 * the same way.
 */

/** The Docker driver on this engine, its data under the harness' basedir. */
export function dockerTestDriver(basedir: string, runtimeRoot: string): WorkspaceDriver {
  return instantiateDriver(
    dockerDriver,
    dockerDriver.configSchema.parse({
      dataRoot: basedir,
      socketPath: SOCKET_PATH,
      baseImage: BASE_IMAGE,
      runtimeRoot,
      memoryBytes: 512 * 1024 * 1024,
      stopTimeoutSeconds: 1,
    }),
    { basedir, cwd: process.cwd(), uid: process.getuid?.() ?? -1, installationId: testInstallationId },
  );
}

/** The E2B emulator and a driver over it (`emulator.sandbox(id)` shows what it still holds). */
export async function startE2bTestBackend() {
  const testbed = await createE2bTestbed();
  return { emulator: testbed.emulator, driver: testbed.newDriver(), close: () => testbed.cleanup() };
}

/** The Kubernetes emulator (its own namespace), a driver over it and a CoreV1 client to inspect it. */
export async function startKubeTestBackend() {
  const testbed = await createKubeTestbed();
  return {
    core: testbed.core,
    namespace: testbed.namespace,
    driver: testbed.newDriver(),
    close: () => testbed.cleanup(),
  };
}
