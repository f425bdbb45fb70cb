import { createDriverTestbed } from "./support/e2b-driver-env";
import { describeE2b } from "./support/e2b-env";
import type { ContractDriver } from "../contract/backend-contract";

// `e2b`: the unmodified e2b SDK against the loopback E2B emulator, whose sandboxes are network-none
// containers (test/fixtures/e2b-emulator). Same Docker rule as the docker suites.
export const e2bContract: ContractDriver = {
  describe: describeE2b,
  title: "e2b",
  async setup() {
    const testbed = await createDriverTestbed();
    return {
      newDriver: () => testbed.newDriver(),
      spec: (workspaceId) => testbed.spec(workspaceId),
      cleanup: () => testbed.cleanup(),
    };
  },
};
