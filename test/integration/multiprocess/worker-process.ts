/**
 * A worker process for the multi-process tests: Berth's worker runtime (H5's startWorkerRuntime) with the
 * local machine controller wrapped so the test can see and hold provisioning:
 *   - each provision appends `start <pid> <workspaceId>` / `done <pid> <workspaceId>` to MP_CONTROL_DIR/provisions.log;
 *   - while MP_CONTROL_DIR/block exists, a provision waits until MP_CONTROL_DIR/release appears (fs.watch, no polling).
 * Prints "ready" once its workers run.
 */
import fs from "node:fs";
import path from "node:path";
import { loadConfig } from "@/server/config/config";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { LocalMachineController } from "@/server/engine/local-machine";
import { createLogger } from "@/server/logger";
import { getQueues } from "@/server/queue/queues";
import type { WorkspaceSpec } from "@/server/workspace/provider";
import { startWorkerRuntime } from "@/workers/runtime";

const controlDir = process.env.MP_CONTROL_DIR!;
const log = (line: string) => fs.appendFileSync(path.join(controlDir, "provisions.log"), `${line}\n`);

function waitForFile(file: string): Promise<void> {
  return new Promise((resolve) => {
    const watcher = fs.watch(path.dirname(file), () => {
      if (fs.existsSync(file)) {
        watcher.close();
        resolve();
      }
    });
    if (fs.existsSync(file)) {
      watcher.close();
      resolve();
    }
  });
}

class ObservedMachine extends LocalMachineController {
  override async provision(spec: WorkspaceSpec) {
    log(`start ${process.pid} ${spec.workspaceId}`);
    if (fs.existsSync(path.join(controlDir, "block"))) await waitForFile(path.join(controlDir, "release"));
    const handle = await super.provision(spec);
    log(`done ${process.pid} ${spec.workspaceId}`);
    return handle;
  }
}

const config = loadConfig();
const engineConfig = loadEngineConfig();
const runtime = await startWorkerRuntime({
  redis: config.redis,
  workers: config.workers,
  log: createLogger({ level: "silent" }),
  healthPort: null,
  schedules: [],
  engine: {
    machine: new ObservedMachine({
      basedir: engineConfig.basedir,
      ...(engineConfig.sandbox ? { sandbox: engineConfig.sandbox } : {}),
    }),
    config: engineConfig,
    queues: getQueues(),
  },
});
process.stdout.write("ready\n");
process.once("SIGTERM", () => void runtime.stop().then(() => process.exit(0)));
