import type { AnyDriverDefinition, DriverDefinition } from "@/server/workspace/drivers/driver";
import { bubblewrapDriver } from "@/server/workspace/drivers/bubblewrap/driver";
import { dockerDriver } from "@/server/workspace/drivers/docker/driver";
import { e2bDriver } from "@/server/workspace/drivers/e2b/driver";
import { kubernetesDriver } from "@/server/workspace/drivers/kubernetes/driver";
import { hostUnconfinedDriver } from "@/server/workspace/drivers/host-unconfined/driver";

/**
 * Every workspace backend Berth knows, by the name operators configure (BERTH_WORKSPACE_BACKEND,
 * BERTH_WORKSPACE_BACKENDS). Adding a backend is one folder under server/workspace/drivers/ exporting a
 * DriverDefinition, and one line here.
 */
export const DRIVERS = {
  local: bubblewrapDriver,
  "host-unconfined": hostUnconfinedDriver,
  docker: dockerDriver,
  e2b: e2bDriver,
  kubernetes: kubernetesDriver,
} as const satisfies Record<string, AnyDriverDefinition>;

/**
 * A set of driver definitions by name. The engine config and the driver set take one (default: DRIVERS),
 * so a test can prove that a backend plugs in through a registry entry alone.
 */
export type DriverRegistry = Readonly<Record<string, AnyDriverDefinition>>;

/** A configured name: one of the registry's keys (the engine config checks it). */
export type DriverName = string;

/** The definition of a configured name (the engine config validated it against the registry). */
export function driverDefinition(
  name: DriverName,
  registry: DriverRegistry = DRIVERS,
): DriverDefinition<unknown> {
  const definition = registry[name];
  if (!definition) throw new Error(`no workspace driver named ${name}`);
  // Each definition is typed by its own config; callers pass it only what its own schema produced.
  return definition;
}
