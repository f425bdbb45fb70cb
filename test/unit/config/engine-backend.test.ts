import { describe, expect, it } from "vitest";
import { LocalMachineController } from "@/server/engine/local-machine";
import { createMachineController } from "@/server/engine/engine";
import { loadEngineConfig } from "@/server/engine/engine-config";

const ROOT = 0;
const USER = 1000;

describe("engine config: the workspace backend", () => {
  it("defaults to the bubblewrap-confined local backend, reported as isolated", () => {
    const config = loadEngineConfig({}, "/srv/berth", ROOT);
    expect(config.backend).toBe("local");
    const machine = createMachineController(config);
    expect(machine).toBeInstanceOf(LocalMachineController);
    expect(machine.isolation).toEqual({ backend: "local", isolated: true, sandbox: "bubblewrap" });
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
    expect(createMachineController(config).isolation).toEqual({
      backend: "host-unconfined",
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
    expect(config.sandbox).toMatchObject({
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
});
