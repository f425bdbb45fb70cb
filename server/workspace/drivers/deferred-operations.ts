import type { DriverImplementation } from "@/server/workspace/drivers/driver";

/** A driver's operations: what its implementation offers besides the facts. */
export type DriverOperations = Omit<DriverImplementation, "persistent" | "isolation" | "capabilities">;
type OperationName = Exclude<keyof DriverOperations, "close">;

/** The operations every driver has (`WorkspaceDriver`); a deferred driver adds the optional ones it implements. */
export const REQUIRED_OPERATIONS = [
  "create",
  "stop",
  "purge",
  "exists",
  "listResources",
  "reap",
  "attach",
  "isAlive",
  "detach",
] as const satisfies readonly OperationName[];

/**
 * The warm pool's operations (`capabilities.warmPool`, driver.ts): a driver that keeps pools has all of
 * them, and the pool core (server/modules/pool/) checks for all of them.
 */
export const WARM_POOL_OPERATIONS = [
  "warmPoolKey",
  "createIdleMachine",
  "bindIdleMachine",
  "discardIdleMachine",
  "listIdleMachines",
] as const satisfies readonly OperationName[];

/**
 * A driver's operations built on their first call from a module imported then, so a process that never
 * touches a backend never loads its SDK. Every Berth process (each API, worker and CLI run) builds every
 * configured driver at start, and the SDKs are most of what it would parse: the Kubernetes client alone
 * took 1.6 s of a 4.2 s start, E2B's and dockerode another 0.3 s with some 250 modules.
 *
 * `names` lists the operations the loaded module has (optional ones such as `usage` included), since the
 * engine and the API check whether an operation exists before any call. `close` releases what the loaded
 * operations hold, and nothing when they never loaded.
 */
export function deferredOperations<Name extends OperationName>(
  names: readonly Name[],
  load: () => Promise<Pick<DriverOperations, Name | "close">>,
): Pick<DriverOperations, Name> & { close(): Promise<void> } {
  let loaded: ReturnType<typeof load> | undefined;
  const operations = () => (loaded ??= load());
  const forwarded: Record<string, (...args: unknown[]) => Promise<unknown>> = {};
  for (const name of names) {
    forwarded[name] = async (...args) => {
      const target = (await operations())[name] as unknown as (...params: unknown[]) => Promise<unknown>;
      return target(...args);
    };
  }
  return {
    ...(forwarded as unknown as Pick<DriverOperations, Name>),
    async close() {
      if (loaded) await (await loaded).close?.();
    },
  };
}
