import type { DriverDefinition } from "@/server/workspace/backend/driver";
import { bubblewrapDriver } from "./bubblewrap/driver";
import { dockerDriver } from "./docker/driver";
import { e2bDriver } from "./e2b/driver";
import { hostUnconfinedDriver } from "./local/driver";

/**
 * Every workspace backend Berth knows, by the name operators configure (BERTH_WORKSPACE_BACKEND,
 * BERTH_WORKSPACE_BACKENDS). Adding a backend is one folder under server/workspace/backends/ exporting a
 * DriverDefinition, and one line here.
 */
export const DRIVERS = {
  local: bubblewrapDriver,
  "host-unconfined": hostUnconfinedDriver,
  docker: dockerDriver,
  e2b: e2bDriver,
} as const satisfies Record<string, Pick<DriverDefinition, "name" | "kind" | "summary">>;

export type DriverName = keyof typeof DRIVERS;

export const DRIVER_NAMES = Object.keys(DRIVERS) as [DriverName, ...DriverName[]];

/** The definition of a configured name (the engine config validated it against DRIVER_NAMES). */
export function driverDefinition(name: DriverName): DriverDefinition<unknown> {
  // Each definition is typed by its own config; callers pass it only what its own schema produced.
  return DRIVERS[name];
}

/** What an operator reads about a driver (its definition's one line); "" for a driver not registered here. */
export function driverSummary(name: string): string {
  return name in DRIVERS ? DRIVERS[name as DriverName].summary : "";
}
