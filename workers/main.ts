import { getConfig } from "@/server/config/config";
import { disconnectDb } from "@/server/db";
import { getLogger } from "@/server/logger";
import { closeSharedQueues } from "@/server/queue/queues";
import { closeSharedRedis } from "@/server/redis";
import { startWorkerRuntime } from "./runtime";

// Composition root of the standalone worker process (`npm run workers`): config → workers → signals.
const config = getConfig();
const log = getLogger().child({ process: "workers" });

const runtime = await startWorkerRuntime({ redis: config.redis, workers: config.workers, log });

let shuttingDown = false;
async function shutdown(signal: string): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  log.info({ signal }, "shutting down");
  try {
    await runtime.stop();
    await Promise.all([closeSharedQueues(), closeSharedRedis(), disconnectDb()]);
    log.info("stopped");
    process.exit(0);
  } catch (error) {
    log.error({ err: error }, "unclean shutdown");
    process.exit(1);
  }
}
process.once("SIGTERM", () => void shutdown("SIGTERM"));
process.once("SIGINT", () => void shutdown("SIGINT"));
