import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { bubblewrapDriver } from "@/server/workspace/backends/bubblewrap/driver";
import { describeSandbox, specOf } from "../unit/workspace/support/sandbox-env";
import { describeBackendContract } from "./backend-contract";

// `local`: host folders confined by bubblewrap, built from the registry's definition through the same path
// as boot (env → configFromEnv → schema → create). Fails in CI when bwrap does not work (sandbox-env.ts).
describeSandbox("local (bubblewrap)", () => {
  describeBackendContract("local", async () => {
    const basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-contract-local-")));
    const context = { basedir, cwd: process.cwd(), uid: process.getuid?.() ?? -1 };
    const config = bubblewrapDriver.configSchema.parse(bubblewrapDriver.configFromEnv({}, context));
    return {
      newDriver: () => bubblewrapDriver.create(config, context),
      spec: (workspaceId) => specOf(workspaceId),
      cleanup: () => fs.rm(basedir, { recursive: true, force: true }),
    };
  });
});
