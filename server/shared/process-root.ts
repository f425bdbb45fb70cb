/**
 * THE process-global handle: the one Berth root (server/composition/berth.ts, `createBerth`) this process
 * runs on. It is the only process-wide state Berth keeps, and it exists for one reason: under `npm start`
 * one process holds two copies of the server modules (scripts/start.ts loads them through tsx, Next's
 * production bundle carries its own), and Next's route handlers are entered by Next, not called by the
 * root, so they cannot be handed the root as an argument. The handle sits on `globalThis` under a
 * `Symbol.for` key, which both copies resolve to the same symbol, so Next's copy reaches the root that
 * scripts/berth-process.ts built instead of building a second database pool, engine or MCP child set.
 *
 * Everything else gets the root passed down: the tRPC context carries it (`ctx.berth`), the workers' runtime
 * and processors receive it, the CLI builds its own. This module is the bottom layer (it imports nothing);
 * the typed accessors are in server/composition/process-berth.ts.
 */
const HANDLE_KEY = Symbol.for("berth.process-root");

type Handle = {
  root: unknown;
  /** Builds the root on first use when no composition root installed one (Next alone, tests). */
  build: (() => unknown) | undefined;
};

function handle(): Handle {
  const holder = globalThis as { [HANDLE_KEY]?: Handle };
  return (holder[HANDLE_KEY] ??= { root: undefined, build: undefined });
}

export class ProcessRootError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProcessRootError";
  }
}

/** The installed root, or undefined when none is (yet). */
export function peekProcessRoot<T>(): T | undefined {
  return handle().root as T | undefined;
}

/** The installed root, built by the registered builder when none is installed yet. */
export function processRoot<T>(): T {
  const current = handle();
  if (current.root !== undefined) return current.root as T;
  if (!current.build) {
    throw new ProcessRootError(
      "no Berth root in this process: a composition root must install one (installProcessBerth)",
    );
  }
  current.root = current.build();
  return current.root as T;
}

/** Installs the process' root; a second one while another is installed is refused (one root per process). */
export function installProcessRoot(root: unknown): void {
  const current = handle();
  if (current.root !== undefined && current.root !== root) {
    throw new ProcessRootError("this process already runs on another Berth root; close it first");
  }
  current.root = root;
}

/** Clears the handle and returns the root it held (shutdown closes it exactly once). */
export function takeProcessRoot<T>(): T | undefined {
  const current = handle();
  const root = current.root as T | undefined;
  current.root = undefined;
  return root;
}

/** How a root is built on first use when nobody installed one (server/composition/process-berth.ts). */
export function setProcessRootBuilder(build: () => unknown): void {
  handle().build = build;
}
