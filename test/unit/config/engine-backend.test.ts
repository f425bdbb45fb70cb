import { describe, expect, it } from "vitest";
import { createDriverSet } from "@/server/engine/driver-set";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { ZBackendKind } from "@/server/workspace/drivers/kind";
import { DRIVERS } from "@/server/workspace/drivers/registry";

const ROOT = 0;
const USER = 1000;

describe("engine config: the workspace backend", () => {
  it("defaults to the bubblewrap-confined local backend, reported as isolated", () => {
    const config = loadEngineConfig({}, "/srv/berth", ROOT);
    expect(config.backend).toBe("local");
    const driver = createDriverSet(config).default;
    expect(driver.name).toBe("local");
    expect(driver.kind).toBe("local");
    expect(driver.isolation).toEqual({ isolated: true, sandbox: "bubblewrap" });
  });

  it("refuses host-unconfined as root unless told twice", () => {
    const env = { BERTH_WORKSPACE_BACKEND: "host-unconfined" };
    expect(() => loadEngineConfig(env, "/srv/berth", ROOT)).toThrow(/refuses to run as root/);
    expect(() => loadEngineConfig(env, "/srv/berth", ROOT)).toThrow(/BERTH_HOST_UNCONFINED_ALLOW_ROOT=1/);
    const twice = loadEngineConfig({ ...env, BERTH_HOST_UNCONFINED_ALLOW_ROOT: "1" }, "/srv/berth", ROOT);
    expect(twice.backend).toBe("host-unconfined");
    expect(loadEngineConfig(env, "/srv/berth", USER).backend).toBe("host-unconfined");
  });

  it("reports host-unconfined as what it is: not isolated", () => {
    const config = loadEngineConfig({ BERTH_WORKSPACE_BACKEND: "host-unconfined" }, "/srv/berth", USER);
    expect(createDriverSet(config).default.isolation).toEqual({
      isolated: false,
      sandbox: null,
    });
  });

  it("validates the sandbox settings", () => {
    const config = loadEngineConfig(
      {
        BERTH_SANDBOX_NETWORK: "yes",
        BERTH_SANDBOX_PIDS_LIMIT: "128",
        BERTH_SANDBOX_READONLY_PATHS: "/opt/tools:/srv/node_modules",
        BERTH_SANDBOX_RUNTIME_ROOT: "run",
      },
      "/srv/berth",
      ROOT,
    );
    expect(config.drivers?.local).toMatchObject({
      network: true,
      pidsLimit: 128,
      readOnlyPaths: ["/opt/tools", "/srv/node_modules"],
      runtimeRoot: "/srv/berth/run",
    });
    expect(() => loadEngineConfig({ BERTH_SANDBOX_PIDS_LIMIT: "2" }, "/srv", ROOT)).toThrow(/PIDS_LIMIT/);
    expect(() => loadEngineConfig({ BERTH_SANDBOX_READONLY_PATHS: "relative" }, "/srv", ROOT)).toThrow(
      /READONLY_PATHS/,
    );
    expect(() => loadEngineConfig({ BERTH_WORKSPACE_BACKEND: "host" }, "/srv", ROOT)).toThrow(/BACKEND/);
  });

  it("keeps the workspaces in the installation's data folder unless told where", () => {
    expect(loadEngineConfig({}, "/srv/berth", ROOT).basedir).toBe("/srv/berth/.data/workspaces");
    expect(loadEngineConfig({ BERTH_DATA_DIR: "/var/lib/berth" }, "/srv/berth", ROOT).basedir).toBe(
      "/var/lib/berth/workspaces",
    );
    expect(
      loadEngineConfig(
        { BERTH_DATA_DIR: "/var/lib/berth", BERTH_WORKSPACE_BASEDIR: "/mnt/workspaces" },
        "/srv/berth",
        ROOT,
      ).basedir,
    ).toBe("/mnt/workspaces");
  });

  it("runs several backends side by side, the default first, each with its own validated config", () => {
    const config = loadEngineConfig(
      { BERTH_WORKSPACE_BACKENDS: "local,docker", BERTH_DOCKER_CPUS: "2" },
      "/srv/berth",
      ROOT,
    );
    expect(config.backends).toEqual(["local", "docker"]);
    expect(config.drivers?.docker).toMatchObject({ cpus: 2, dataRoot: "/srv/berth/.data/workspaces" });
    const drivers = createDriverSet(config);
    expect(drivers.default.name).toBe("local");
    expect(drivers.forKind("docker").isolation).toEqual({ isolated: true, sandbox: null });
    expect(() => drivers.forKind("e2b")).toThrow(/does not run the e2b workspace backend/);
  });

  it("refuses backend lists that cannot work, naming the variable", () => {
    expect(() => loadEngineConfig({ BERTH_WORKSPACE_BACKENDS: "docker" }, "/srv", ROOT)).toThrow(
      /must include BERTH_WORKSPACE_BACKEND \(local\)/,
    );
    expect(() =>
      loadEngineConfig({ BERTH_WORKSPACE_BACKENDS: "local,host-unconfined" }, "/srv", USER),
    ).toThrow(/both local and host-unconfined/);
    expect(() => loadEngineConfig({ BERTH_WORKSPACE_BACKENDS: "local,nomad" }, "/srv", ROOT)).toThrow(
      /BERTH_WORKSPACE_BACKENDS/,
    );
    expect(() =>
      loadEngineConfig({ BERTH_WORKSPACE_BACKENDS: "local,docker", BERTH_DOCKER_CPUS: "-1" }, "/srv", ROOT),
    ).toThrow(/BERTH_DOCKER_CPUS/);
  });

  it("takes the metering rates' keys from the registry's kinds, naming the variable", () => {
    const rates = (value: object) => ({ BERTH_METERING_RATES: JSON.stringify(value) });
    expect(loadEngineConfig(rates({ "*": { turn: 1 }, docker: { turn: 2 } }), "/srv", ROOT).backend).toBe(
      "local",
    );
    expect(() => loadEngineConfig(rates({ moon: { turn: 1 } }), "/srv", ROOT)).toThrow(
      /BERTH_METERING_RATES/,
    );
  });

  it("gives every registered driver a kind of the stored form, a label and an instructions label", () => {
    for (const definition of Object.values(DRIVERS)) {
      expect(ZBackendKind.safeParse(definition.kind).success).toBe(true);
      expect(definition.label).not.toBe("");
      expect(definition.instructionsLabel).not.toBe("");
    }
    const drivers = createDriverSet(
      loadEngineConfig({ BERTH_WORKSPACE_BACKENDS: "local,docker" }, "/srv", USER),
    );
    expect(drivers.definitionOf("docker")?.instructionsLabel).toBe("Docker-based");
    expect(drivers.definitionOf("e2b")).toBeUndefined();
  });
});
