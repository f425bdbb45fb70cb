/**
 * The process-wide instances (config, logger, database client, Redis, queues, engine, services, auth), in
 * one registry every copy of Berth's server modules in a process shares. Under `npm start` there are two
 * copies: scripts/start.ts loads the server through tsx, and Next's production bundle carries its own.
 * A module-level singleton would exist once per copy (two database pools, two engines, two sets of MCP
 * children); a slot here exists once per process, keyed by `Symbol.for`, which both copies resolve to the
 * same symbol.
 *
 * A composition root that builds everything up front can `sealProcessRegistry()`: from then on a slot that
 * is still empty throws instead of being filled, so a copy (Next's) can never quietly build its own
 * instance of something the root forgot.
 */
const REGISTRY_KEY = Symbol.for("berth.process-registry");

type Registry = { slots: Map<string, unknown>; sealedBy: string | undefined };

function registry(): Registry {
  const holder = globalThis as { [REGISTRY_KEY]?: Registry };
  return (holder[REGISTRY_KEY] ??= { slots: new Map(), sealedBy: undefined });
}

export type ProcessSlot<T> = {
  /** The instance, or undefined when none was built (or it was closed). */
  peek(): T | undefined;
  /**
   * The instance, built with `create` on first use, or rebuilt when `isCurrent` says the one held is stale
   * (it was built over an engine a test has replaced). Building throws once the registry is sealed.
   */
  get(create: () => T, isCurrent?: (held: T) => boolean): T;
  /** Installs or clears the instance (composition roots, tests, shutdown). */
  set(value: T | undefined): void;
  /** Clears the slot and returns what it held (shutdown: close what was there exactly once). */
  take(): T | undefined;
};

export class ProcessRegistrySealedError extends Error {
  constructor(key: string, sealedBy: string) {
    super(
      `"${key}" was not built by ${sealedBy} before it sealed the process registry; a second copy of the ` +
        "server modules would have built its own. Build it in the composition root.",
    );
    this.name = "ProcessRegistrySealedError";
  }
}

export function processSlot<T>(key: string): ProcessSlot<T> {
  const slots = () => registry().slots;
  return {
    peek: () => slots().get(key) as T | undefined,
    get(create, isCurrent) {
      const current = slots().get(key) as T | undefined;
      if (current !== undefined && (!isCurrent || isCurrent(current))) return current;
      const { sealedBy } = registry();
      if (sealedBy) throw new ProcessRegistrySealedError(key, sealedBy);
      const created = create();
      slots().set(key, created);
      return created;
    },
    set(value) {
      if (value === undefined) slots().delete(key);
      else slots().set(key, value);
    },
    take() {
      const current = slots().get(key) as T | undefined;
      slots().delete(key);
      return current;
    },
  };
}

/** From now on empty slots throw instead of being filled (see the module comment). */
export function sealProcessRegistry(owner: string): void {
  registry().sealedBy = owner;
}

/** Keys of the slots that hold an instance (diagnostics and tests). */
export function processSlotKeys(): string[] {
  return [...registry().slots.keys()];
}
