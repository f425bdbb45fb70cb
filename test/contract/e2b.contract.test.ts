import { createDriverTestbed } from "../e2b/support/e2b-driver-env";
import { describeE2b } from "../e2b/support/e2b-env";
import { describeBackendContract } from "./backend-contract";

// `e2b`: the unmodified e2b SDK against the loopback E2B emulator, whose sandboxes are network-none
// containers (test/fixtures/e2b-emulator). Same Docker rule as the docker suites.
describeE2b("e2b", () => {
  describeBackendContract("e2b", async () => {
    const testbed = await createDriverTestbed();
    return {
      newDriver: () => testbed.newDriver(),
      spec: (workspaceId) => testbed.spec(workspaceId),
      cleanup: () => testbed.cleanup(),
    };
  });
});
