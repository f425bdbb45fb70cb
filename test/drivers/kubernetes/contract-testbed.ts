import { specOf } from "../local/support/sandbox-env";
import { createDriverTestbed, describeKube } from "./support/kube-env";
import type { ContractDriver } from "../contract/backend-contract";

// `kubernetes`: one Pod and claim per workspace, against the loopback API server emulator whose Pods are
// network-none Docker containers (test/fixtures/kube-apiserver). Fails in CI without Docker and the image.
export const kubernetesContract: ContractDriver = {
  describe: describeKube,
  title: "kubernetes",
  async setup() {
    const testbed = await createDriverTestbed();
    return {
      newDriver: () => testbed.newDriver(),
      spec: (workspaceId) => {
        const spec = specOf(workspaceId);
        // The testbed purges what it saw when it is cleaned up (Pods and claims).
        testbed.specFor(workspaceId);
        return { ...spec, tenantId: "tenant-k8s", userId: "user-k8s" };
      },
      cleanup: () => testbed.cleanup(),
    };
  },
};
