import { describe, expect, it } from "vitest";
import { loadWarmPoolConfig } from "@/server/engine/warm-pool-config";
import { DRIVERS } from "@/server/workspace/drivers/registry";

/** BERTH_WARM_POOLS: parsed by driver name into pools by kind; every mistake fails the boot, naming it. */
describe("BERTH_WARM_POOLS", () => {
  const load = (value: string | undefined, enabled = ["local", "docker"]) =>
    loadWarmPoolConfig(value === undefined ? {} : { BERTH_WARM_POOLS: value }, enabled, DRIVERS);

  it("is no pools when unset or empty", () => {
    expect(load(undefined)).toEqual({ pools: {}, refillIntervalMs: 10_000 });
    expect(load(" ").pools).toEqual({});
  });

  it("reads min-max and a single size per driver, keyed by kind", () => {
    expect(load("docker:2-10, local:3").pools).toEqual({
      docker: { min: 2, max: 10 },
      local: { min: 3, max: 3 },
    });
    expect(load("local:0-4").pools).toEqual({ local: { min: 0, max: 4 } });
  });

  it.each([
    ["docker", /not <driver>:<min>-<max>/],
    ["docker:-1", /not <driver>:<min>-<max>/],
    ["docker:4-2", /min <= max/],
    ["docker:0", /max >= 1/],
    ["e2b:1-2", /not an enabled backend/],
    ["docker:1-2\u0000", /not <driver>:<min>-<max>/],
  ])("refuses %j at boot with a reason", (value, reason) => {
    expect(() => load(value)).toThrow(reason);
  });

  it("takes the refill interval, never under a second", () => {
    expect(
      loadWarmPoolConfig({ BERTH_WARM_POOL_REFILL_INTERVAL_MS: "5000" }, ["local"], DRIVERS),
    ).toMatchObject({
      refillIntervalMs: 5_000,
    });
    expect(() => loadWarmPoolConfig({ BERTH_WARM_POOL_REFILL_INTERVAL_MS: "5" }, ["local"], DRIVERS)).toThrow(
      /BERTH_WARM_POOL_REFILL_INTERVAL_MS/,
    );
  });
});
