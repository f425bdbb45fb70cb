import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { instantiateDriver } from "@/server/workspace/drivers/driver";
import { bubblewrapDriver } from "@/server/workspace/drivers/bubblewrap/driver";
import { describeSandbox, specOf } from "./support/sandbox-env";
import type { ContractDriver } from "../contract/backend-contract";

// `local`: host folders confined by bubblewrap, built from the registry's definition through the same path
// as boot (env → configFromEnv → schema → create). Fails in CI when bwrap does not work (sandbox-env.ts).
export const localContract: ContractDriver = {
  describe: describeSandbox,
  title: "local (bubblewrap)",
  async setup() {
    const basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-contract-local-")));
    const context = { basedir, cwd: process.cwd(), uid: process.getuid?.() ?? -1 };
    const config = bubblewrapDriver.configSchema.parse(bubblewrapDriver.configFromEnv({}, context));
    return {
      newDriver: () => instantiateDriver(bubblewrapDriver, config, context),
      spec: (workspaceId) => specOf(workspaceId),
      cleanup: () => fs.rm(basedir, { recursive: true, force: true }),
    };
  },
};
