/**
 * The typed side of the one process-global handle (server/shared/process-root.ts): the Berth this process
 * runs on. Composition roots install the one they built (`npm start`: scripts/berth-process.ts before Next
 * loads; `npm run workers`: workers/main.ts; the CLI: scripts/cli/main.ts); where none did (Next alone,
 * tests), the first use builds one from the environment with the same `createBerth` `npm start` uses.
 *
 * Only code that is entered from outside the root reads it: Next's route handlers and their tRPC handler
 * (they pass it on as the tRPC context's `berth`), and the test setup. Everything else is handed the root or
 * the part of it it needs.
 */
import { loadConfig } from "@/server/config/config";
import {
  installProcessRoot,
  processRoot,
  setProcessRootBuilder,
  takeProcessRoot,
} from "@/server/shared/process-root";
import { type Berth, createBerth } from "./berth";

setProcessRootBuilder(() => createBerth(loadConfig()));

/** This process' Berth (built from the environment on first use when no composition root installed one). */
export function processBerth(): Berth {
  return processRoot<Berth>();
}

/** Makes `berth` this process' root (a composition root, before anything serves). Refuses a second one. */
export function installProcessBerth(berth: Berth): Berth {
  installProcessRoot(berth);
  return berth;
}

/** Closes this process' Berth, if any, and clears the handle (graceful shutdown, per-file test teardown). */
export async function closeProcessBerth(options?: { stepMs?: number }): Promise<void> {
  await takeProcessRoot<Berth>()?.close(options);
}
