import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { instantiateDriver } from "@/server/workspace/drivers/driver";
import { dockerDriver } from "@/server/workspace/drivers/docker/driver";
import { specOf } from "../local/support/sandbox-env";
import { BASE_IMAGE, describeDocker, SOCKET_PATH, testInstallationId } from "./support/docker-env";
import type { ContractDriver } from "../contract/backend-contract";

// `docker`: one container per workspace on this host's engine (network none). Fails in CI without an
// engine and the base image (docker-env.ts).
export const dockerContract: ContractDriver = {
  describe: describeDocker,
  title: "docker",
  async setup() {
    const basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-contract-docker-")));
    const context = {
      basedir,
      cwd: process.cwd(),
      uid: process.getuid?.() ?? -1,
      installationId: testInstallationId,
    };
    const runtimeRoot = path.join("/tmp", `berth-crt-${randomBytes(3).toString("hex")}`);
    const fromEnv = dockerDriver.configFromEnv(
      {
        DOCKER_SOCKET: SOCKET_PATH,
        BERTH_DOCKER_BASE_IMAGE: BASE_IMAGE,
        BERTH_DOCKER_RUNTIME_ROOT: runtimeRoot,
      },
      context,
    ) as Record<string, unknown>;
    const config = dockerDriver.configSchema.parse({
      ...fromEnv,
      memoryBytes: 512 * 1024 * 1024,
      pidsLimit: 256,
      stopTimeoutSeconds: 1,
    });
    return {
      newDriver: () => instantiateDriver(dockerDriver, config, context),
      spec: (workspaceId) => specOf(workspaceId),
      cleanup: async () => {
        await fs.rm(basedir, { recursive: true, force: true });
        await fs.rm(runtimeRoot, { recursive: true, force: true });
      },
    };
  },
};
