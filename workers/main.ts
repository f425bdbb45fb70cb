import { createBerth } from "@/server/composition/berth";
import { closeProcessBerth, installProcessBerth } from "@/server/composition/process-berth";
import { loadConfig } from "@/server/config/config";
import { startWorkerRuntime, type WorkerRuntime } from "./runtime";

// Composition root of the standalone worker process (`npm run workers`): config → Berth → workers → signals.
const berth = installProcessBerth(createBerth(loadConfig()));
const { config } = berth;
const log = berth.log.child({ process: "workers" });

// Signals are handled from here on: the worker counts as alive (its first beat) a moment before the start
// resolves, and a process manager may stop it at any time, so a stop during the start waits for it.
const starting: Promise<WorkerRuntime> = startWorkerRuntime({
  berth,
  redis: config.redis,
  workers: config.workers,
  log,
});

/** Jobs in flight get this long to finish before the process gives up on a clean stop. */
const SHUTDOWN_DEADLINE_MS = 20_000;
/** Each shared resource gets this long to close; with Redis or the database down a close can hang. */
const CLOSE_STEP_MS = 3_000;

// Once per process, for SIGINT or SIGTERM to the process or its group; a repeated signal is ignored
// rather than left to Node's default (which would kill the process mid-shutdown).
let shuttingDown = false;
async function shutdown(signal: string): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  log.info({ signal }, "shutting down");
  const deadline = setTimeout(() => {
    log.error({ deadlineMs: SHUTDOWN_DEADLINE_MS }, "unclean shutdown: jobs did not finish in time");
    process.exit(1);
  }, SHUTDOWN_DEADLINE_MS);
  try {
    // A start still under way finishes first (bounded by the deadline); a failed one has nothing to stop.
    const runtime = await starting.catch(() => null);
    // Bounded by itself (no wait without jobs in flight, whatever Redis does).
    await runtime?.stop();
    // Every workspace this process attached (MCP children, gateway connections), then the connections.
    await closeProcessBerth({ stepMs: CLOSE_STEP_MS });
    clearTimeout(deadline);
    log.info("stopped");
    process.exit(0);
  } catch (error) {
    log.error({ err: error }, "unclean shutdown");
    process.exit(1);
  }
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
log.info("starting");

try {
  await starting;
} catch (error) {
  // E.g. EADDRINUSE on the health port: the runtime binds it before taking any job, so nothing ran.
  log.error({ err: error }, "workers could not start");
  process.exit(1);
}
