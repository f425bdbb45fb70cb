/**
 * A worker process for the multi-process tests: Berth's worker runtime (H5's startWorkerRuntime) with the
 * local machine controller wrapped so the test can see and hold provisioning:
 *   - each provision appends `start <pid> <workspaceId>` / `done <pid> <workspaceId>` to MP_CONTROL_DIR/provisions.log;
 *   - while MP_CONTROL_DIR/block exists, a provision waits until MP_CONTROL_DIR/release appears (fs.watch, no polling).
 * Prints "ready" once its workers run.
 */
import fs from "node:fs";
import path from "node:path";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { loadConfig } from "@/server/config/config";
import { createDriverSet, driverSetOf } from "@/server/engine/driver-set";
import { loadEngineConfig, type EngineConfig } from "@/server/engine/engine-config";
import { createLogger } from "@/server/logger";
import { tenantDriverSettings } from "@/server/modules/backend-settings/backend-settings.service";
import { ensureInstallationId } from "@/server/modules/installation/installation.data";
import { getQueues } from "@/server/queue/queues";
import type { WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { FolderCheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { startWorkerRuntime } from "@/workers/runtime";
import { processBerth } from "@/server/composition/process-berth";

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

/**
 * The configured drivers, each machine's creations logged (and held at the "block" file). Labelled with the
 * database's installation id and given the tenants' own backend settings from the database, as the
 * production composition does (the Kubernetes driver refuses to run without an installation id).
 */
function observedDrivers(config: EngineConfig, secrets: { encryptionKey: Buffer }) {
  const tenantSettings = tenantDriverSettings(secretKeyFromBytes(secrets.encryptionKey), processBerth().db);
  return driverSetOf(
    createDriverSet(config, undefined, {
      installationId: () => ensureInstallationId(processBerth().db),
      tenantSettings,
    }).all.map(observed),
  );
}

/** The driver with its `create` logged and held at the "block" file; everything else is the real driver. */
function observed(driver: WorkspaceDriver): WorkspaceDriver {
  return {
    ...driver,
    async create(spec: WorkspaceSpec, options) {
      log(`start ${process.pid} ${spec.workspaceId}`);
      if (fs.existsSync(path.join(controlDir, "block"))) await waitForFile(path.join(controlDir, "release"));
      const handle = await driver.create(spec, options);
      log(`done ${process.pid} ${spec.workspaceId}`);
      return handle;
    },
  };
}

/**
 * The checkpoint store, with blob reads held at the "block-restore" file: a restore that has deleted what
 * the checkpoint lacks and begun writing its files logs `restore-held <pid>` and waits there (for ever: the
 * test kills the process).
 */
function heldStore(store: FolderCheckpointStore): FolderCheckpointStore {
  let reads = 0;
  const held = async () => {
    reads += 1;
    if (reads > 20 && fs.existsSync(path.join(controlDir, "block-restore"))) {
      log(`restore-held ${process.pid}`);
      await waitForFile(path.join(controlDir, "release"));
    }
  };
  const readBlob = store.readBlob.bind(store);
  const readBlobBytes = store.readBlobBytes.bind(store);
  store.readBlob = async (tenantId, hash) => {
    await held();
    return readBlob(tenantId, hash);
  };
  store.readBlobBytes = async (tenantId, hash) => {
    await held();
    return readBlobBytes(tenantId, hash);
  };
  return store;
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
    // The configured driver, exactly as the registry builds it, with an observed machine over its provider.
    drivers: observedDrivers(engineConfig, config.secrets),
    config: engineConfig,
    queues: getQueues(),
    checkpoints: heldStore(
      new FolderCheckpointStore(engineConfig.checkpointDir ?? `${engineConfig.basedir}-checkpoints`),
    ),
  },
});
process.stdout.write("ready\n");
process.once("SIGTERM", () => void runtime.stop().then(() => process.exit(0)));
