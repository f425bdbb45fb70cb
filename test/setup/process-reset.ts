import { afterAll } from "vitest";
// Imported for its effect too: it registers how the process' Berth is built on first use
// (createBerth from the environment), so a file that only calls data functions finds a root.
import { closeProcessBerth } from "@/server/composition/process-berth";

/**
 * Per-file teardown of the projects over real services (`integration`, `e2e`). Their files share a worker's
 * modules (`isolate: false` in vitest.config.ts), and with them the process' Berth root
 * (server/composition/berth.ts): the engine and the workspace services, the agent services with their
 * holder heartbeat and dead-holder reaper, the queues, the Redis connection, the database client, auth and
 * the sign-in guard. What one file built goes with it, as when each file had a process of its own: the
 * next file's first use builds a fresh root from the environment, as a new process does.
 */
afterAll(async () => {
  await closeProcessBerth();
});
