import { AppError } from "@/server/shared/errors";
import {
  type AnyDriverDefinition,
  instantiateDriver,
  type TenantDriverSettings,
  type WorkspaceDriver,
} from "@/server/workspace/drivers/driver";
import type { InstallationIdSource } from "@/server/workspace/drivers/installation";
import type { BackendKind } from "@/server/workspace/drivers/port";
import {
  DRIVERS,
  driverDefinition,
  type DriverName,
  type DriverRegistry,
} from "@/server/workspace/drivers/registry";
import type { EngineConfig } from "./engine-config";

/**
 * The drivers this installation runs, one per stored backend kind. Workspace records say which kind they
 * were created on; everything that acts on a record (attach, provision, stop, purge, reconcile) asks this set
 * for that kind's driver, so several backends serve one deployment side by side.
 */
export type DriverSet = {
  /** The installation's default (BERTH_WORKSPACE_BACKEND). */
  readonly default: WorkspaceDriver;
  readonly all: readonly WorkspaceDriver[];
  /** The driver of a stored kind; UNPROCESSABLE when this installation does not run that backend (any more). */
  forKind(kind: BackendKind): WorkspaceDriver;
  /** The driver a tenant or agent chose by name (or kind), if this installation runs it. */
  find(nameOrKind: string): WorkspaceDriver | undefined;
  /**
   * The registry definition of an enabled driver (its label, instructions label, tenant settings): what
   * the dashboard, the instructions and the backend settings read. Undefined for a kind this installation
   * does not run, or a driver built outside the registry.
   */
  definitionOf(kind: BackendKind): AnyDriverDefinition | undefined;
  close(): Promise<void>;
};

/**
 * Builds every enabled driver from its validated config. `installationId`: this installation's id (the
 * composition passes the database's; see server/workspace/drivers/installation.ts).
 */
export function createDriverSet(
  config: EngineConfig,
  registry: DriverRegistry = DRIVERS,
  options: { installationId?: InstallationIdSource; tenantSettings?: TenantDriverSettings } = {},
): DriverSet {
  const names: readonly DriverName[] = config.backends ?? [config.backend];
  const context = {
    basedir: config.basedir,
    cwd: process.cwd(),
    uid: process.getuid?.() ?? -1,
    ...(options.installationId ? { installationId: options.installationId } : {}),
    ...(options.tenantSettings ? { tenantSettings: options.tenantSettings } : {}),
  };
  const drivers = names.map((name) => {
    const definition = driverDefinition(name, registry);
    const input = config.drivers?.[name] ?? definition.configFromEnv({}, context);
    return instantiateDriver(definition, definition.configSchema.parse(input), context);
  });
  for (const kind of Object.keys(config.warmPools?.pools ?? {})) {
    const driver = drivers.find((candidate) => candidate.kind === kind);
    if (driver && !driver.capabilities.warmPool) {
      throw new AppError("INTERNAL", `BERTH_WARM_POOLS names ${driver.name}, which keeps no warm pools`, {
        userMessage: "Server misconfigured",
        details: { variables: ["BERTH_WARM_POOLS"] },
      });
    }
  }
  return driverSetOf(drivers, registry);
}

/**
 * A set over drivers built elsewhere (tests: a driver that blocks or counts). The first is the default;
 * `registry` holds their definitions, by driver name.
 */
export function driverSetOf(
  drivers: readonly WorkspaceDriver[],
  registry: DriverRegistry = DRIVERS,
): DriverSet {
  const [first] = drivers;
  if (!first) throw new AppError("INTERNAL", "an engine needs at least one workspace driver");
  const byKind = new Map<BackendKind, WorkspaceDriver>();
  for (const driver of drivers) {
    if (byKind.has(driver.kind)) {
      throw new AppError("INTERNAL", `two workspace drivers of kind ${driver.kind} (${driver.name})`);
    }
    byKind.set(driver.kind, driver);
  }
  return {
    default: first,
    all: drivers,
    forKind(kind) {
      const driver = byKind.get(kind);
      if (driver) return driver;
      throw new AppError("UNPROCESSABLE", `this installation does not run the ${kind} workspace backend`, {
        userMessage: `This workspace is on the ${kind} backend, which this installation does not run.`,
        details: { backend: kind, available: drivers.map((each) => each.name) },
      });
    },
    find: (nameOrKind) =>
      drivers.find((driver) => driver.name === nameOrKind) ??
      drivers.find((driver) => driver.kind === nameOrKind),
    definitionOf(kind) {
      const driver = byKind.get(kind);
      return driver && registry[driver.name];
    },
    async close() {
      await Promise.all(drivers.map((driver) => driver.close?.() ?? Promise.resolve()));
    },
  };
}
