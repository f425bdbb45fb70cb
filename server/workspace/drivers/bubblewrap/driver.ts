import path from "node:path";
import { z } from "zod";
import { definedOnly, parseEnv } from "@/server/shared/env-parsing";
import type { DriverDefinition, DriverImplementation } from "@/server/workspace/drivers/driver";
import { HostFolderMachines } from "@/server/workspace/drivers/host-folder/host-folder-machines";
import { HostFolderPool } from "@/server/workspace/drivers/host-folder/host-folder-pool";
import { SandboxedFolders } from "./sandboxed-folders";
import { sandboxTunnelsAvailable } from "./sandbox-tunnel";
import { ZSandboxConfig, type TSandboxConfig } from "./sandbox-config";
import { makeSearchableUpwards } from "./sandbox-dirs";
import { probeSandbox } from "./sandbox-probe";

const ZSandboxEnv = z.object({
  BERTH_SANDBOX_BWRAP: z.string().optional(),
  // Share the host's network with agent commands (default: none, only a private loopback).
  BERTH_SANDBOX_NETWORK: z.stringbool().optional(),
  BERTH_SANDBOX_PIDS_LIMIT: z.coerce.number().int().min(16).optional(),
  // Bytes of memory (swap included) of all the sandboxes of one workspace (a cgroup; Berth as root).
  BERTH_SANDBOX_MEMORY_BYTES: z.coerce
    .number()
    .int()
    .min(16 * 1024 * 1024)
    .optional(),
  BERTH_SANDBOX_COMMAND_TIMEOUT_MS: z.coerce.number().int().min(1_000).optional(),
  BERTH_SANDBOX_UID_BASE: z.coerce.number().int().min(1_000).optional(),
  BERTH_SANDBOX_UID_COUNT: z.coerce.number().int().min(1).optional(),
  // Host paths visible read-only in every sandbox at the same path, separated by ":" (tool installs).
  BERTH_SANDBOX_READONLY_PATHS: z
    .string()
    .transform((value) => value.split(":").filter(Boolean))
    .pipe(z.array(z.string().refine((p) => path.isAbsolute(p), "must be absolute paths")))
    .optional(),
  BERTH_SANDBOX_RUNTIME_ROOT: z.string().optional(),
});

/**
 * `local` (the default backend): host folders under the base dir, every command and stdio MCP server
 * confined by bubblewrap as the workspace's own unprivileged uid (README.md in this folder).
 */
export const bubblewrapDriver: DriverDefinition<TSandboxConfig> = {
  name: "local",
  kind: "local",
  label: "local",
  instructionsLabel: "local",
  summary: "host folders; every command and MCP server confined by bubblewrap (no network by default)",
  configSchema: ZSandboxConfig,
  configFromEnv(env, { cwd }) {
    const vars = parseEnv(ZSandboxEnv, env, "local (bubblewrap) backend");
    return definedOnly({
      bwrapPath: vars.BERTH_SANDBOX_BWRAP,
      network: vars.BERTH_SANDBOX_NETWORK,
      pidsLimit: vars.BERTH_SANDBOX_PIDS_LIMIT,
      memoryLimitBytes: vars.BERTH_SANDBOX_MEMORY_BYTES,
      commandTimeoutMs: vars.BERTH_SANDBOX_COMMAND_TIMEOUT_MS,
      uidBase: vars.BERTH_SANDBOX_UID_BASE,
      uidCount: vars.BERTH_SANDBOX_UID_COUNT,
      readOnlyPaths: vars.BERTH_SANDBOX_READONLY_PATHS,
      runtimeRoot: vars.BERTH_SANDBOX_RUNTIME_ROOT && path.resolve(cwd, vars.BERTH_SANDBOX_RUNTIME_ROOT),
    });
  },
  create(config, { basedir }): DriverImplementation {
    const folders = new SandboxedFolders({ basedir, sandbox: config });
    const machines = new HostFolderMachines({
      basedir,
      folders,
      stopProcesses: (spec) => folders.stopAll(spec),
      processUsage: (spec) => folders.cgroupUsage(spec),
    });
    return {
      persistent: true,
      isolation: { isolated: true, sandbox: "bubblewrap" },
      capabilities: {
        // Host files, but owned by the sandbox uid: bulk writes go through the backend, which hands them over.
        hostPaths: false,
        pauseKeepsMemory: false,
        gateway: "unix-socket",
        mayVanish: false,
        pty: true,
        previews: sandboxTunnelsAvailable(config),
        warmPool: true,
      },
      ...machines.operations(),
      ...new HostFolderPool({ basedir, folders, bakedIn: poolSettings(config) }).operations(),
      attach: (spec) => folders.attach(spec),
      isAlive: (machine) => folders.isAlive(machine),
      // This process' sandboxes of the machine end with close (its gateway, and with it its MCP servers).
      detach: (machine) => machine.close(),
      connectMcp: (machine, options) => folders.connectMcp(machine, options),
      async probe() {
        const madeSearchable = await makeSearchableUpwards(basedir);
        const probe = await probeSandbox(config, { basedir });
        if (!probe.ok) {
          return {
            ok: false,
            reason: `the confined workspace backend (bubblewrap) does not work here: ${probe.reason}`,
            hint: probe.hint,
          };
        }
        const who = probe.dropped ? "a per-workspace uid" : `uid ${probe.uid} in a user namespace`;
        const notes = madeSearchable.map((dir) => `; made ${dir} traversable (o+x) for the sandbox uids`);
        return {
          ok: true,
          summary: `confined by bubblewrap (commands run as ${who}; ${probe.memory})${notes.join("")}`,
        };
      },
    };
  },
};

/**
 * The settings a `local` pool machine counts as made with. An empty pool folder holds none of them (every
 * command reads the config afresh), but the seam promises that a machine made before the config changed
 * is never bound, and turning over a pool of empty folders costs nothing: the uid range (who the folder is
 * handed to), the memory and process limits and what the sandboxes see.
 */
function poolSettings(config: TSandboxConfig) {
  const { uidBase, uidCount, memoryLimitBytes, pidsLimit, network, readOnlyPaths } = config;
  return { driver: "local", uidBase, uidCount, memoryLimitBytes, pidsLimit, network, readOnlyPaths };
}
