import { z } from "zod";
import { AppError } from "@/server/shared/errors";
import { parseEnv } from "@/server/shared/env-parsing";
import type { DriverDefinition, DriverImplementation } from "@/server/workspace/drivers/driver";
import { HostFolderMachines } from "@/server/workspace/drivers/host-folder/host-folder-machines";
import { HostFolderPool } from "@/server/workspace/drivers/host-folder/host-folder-pool";
import { HostFolders } from "@/server/workspace/drivers/host-folder/host-folders";

const ZHostEnv = z.object({
  // host-unconfined as root hands the machine to every agent: refused unless this says so as well.
  BERTH_HOST_UNCONFINED_ALLOW_ROOT: z.stringbool().default(false),
});

const ZHostUnconfinedConfig = z.object({ env: z.record(z.string(), z.string()).default({}) });
type HostUnconfinedConfig = z.output<typeof ZHostUnconfinedConfig>;

/**
 * `host-unconfined`: the same host folders as `local`, but agent commands and stdio MCP servers run on the
 * host with Berth's own privileges. An explicit operator opt-in for trusted agents only; the API reports
 * its workspaces as not isolated and the dashboard shows a banner.
 */
export const hostUnconfinedDriver: DriverDefinition<HostUnconfinedConfig> = {
  name: "host-unconfined",
  kind: "local",
  label: "local",
  instructionsLabel: "local",
  summary: "host folders; commands run on the host with Berth's privileges (trusted agents only)",
  configSchema: ZHostUnconfinedConfig,
  configFromEnv(env, { uid }) {
    const vars = parseEnv(ZHostEnv, env, "host-unconfined backend");
    if (uid === 0 && !vars.BERTH_HOST_UNCONFINED_ALLOW_ROOT) {
      throw new AppError(
        "INTERNAL",
        "BERTH_WORKSPACE_BACKEND=host-unconfined refuses to run as root: every agent command would run as " +
          "root on this machine. Run Berth as an unprivileged user, use the default confined backend " +
          "(unset BERTH_WORKSPACE_BACKEND), or, if you really mean it, also set " +
          "BERTH_HOST_UNCONFINED_ALLOW_ROOT=1.",
        { userMessage: "Server misconfigured", details: { variables: ["BERTH_HOST_UNCONFINED_ALLOW_ROOT"] } },
      );
    }
    return {};
  },
  create(config, { basedir }): DriverImplementation {
    const folders = new HostFolders({ basedir, env: config.env });
    return {
      persistent: true,
      isolation: { isolated: false, sandbox: null },
      capabilities: {
        hostPaths: true,
        pauseKeepsMemory: false,
        gateway: "host",
        mayVanish: false,
        // No browser shell on Berth's own host with Berth's privileges (its secrets, every workspace).
        pty: false,
        previews: false,
        warmPool: true,
      },
      ...new HostFolderMachines({ basedir, folders }).operations(),
      // The same pool folders as `local` (one driver of a kind runs at a time); an empty folder holds
      // nothing of this driver's config, only whose pool made it.
      ...new HostFolderPool({ basedir, folders, bakedIn: { driver: "host-unconfined" } }).operations(),
      attach: (spec) => folders.attach(spec),
      isAlive: (machine) => folders.isAlive(machine),
      detach: (machine) => machine.close(),
      // No connectMcp: MCP servers run on the host, as the commands do.
      probe: () =>
        Promise.resolve({
          ok: true,
          summary:
            "WARNING: host-unconfined: agent commands and MCP servers run on this host with Berth's " +
            "privileges. Trusted agents only.",
        }),
    };
  },
};
