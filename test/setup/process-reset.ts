import { afterAll } from "vitest";

/**
 * Per-file teardown of the projects over real services (`integration`, `e2e`). Their files share a worker's
 * modules (`isolate: false` in vitest.config.ts), and with them the process-wide composition: the engine
 * and the workspace services, the agent services with their holder heartbeat and dead-holder reaper, the
 * queues, the Redis connection and the database client. What one file built goes with it, as when each
 * file had a process of its own: a file that closed the shared queues left the process engine enqueueing
 * on closed ones, and a closed Redis connection left the holder heartbeat failing every 5 s. Each close is
 * a no-op for what was never built, and the next file builds afresh on first use.
 */
afterAll(async () => {
  const { closeProcessComposition } = await import("@/server/composition/services");
  await closeProcessComposition();
  // Then every other slot of server/shared/process-registry.ts (config, logger, auth over the closed
  // database client, the sign-in guard over the closed Redis connection, ...): the next file starts
  // with an empty registry, as a new process does.
  delete (globalThis as Record<symbol, unknown>)[Symbol.for("berth.process-registry")];
});
