import { specOf } from "../unit/workspace/support/sandbox-env";
import { createDriverTestbed, describeKube } from "../kubernetes/support/kube-env";
import { describeBackendContract } from "./backend-contract";

// `kubernetes`: one Pod and claim per workspace, against the loopback API server emulator whose Pods are
// network-none Docker containers (test/fixtures/kube-apiserver). Fails in CI without Docker and the image.
describeKube("kubernetes", () => {
  describeBackendContract("kubernetes", async () => {
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
  });
});
