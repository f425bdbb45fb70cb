import { attachThrough, instantiateDriver, type WorkspaceDriver } from "@/server/workspace/drivers/driver";
import { DRIVERS } from "@/server/workspace/drivers/registry";
import { WorkspaceManager, type WorkspaceManagerOptions } from "./workspace-manager";

type HostFolderOptions = {
  /** Host folder under which every workspace lives as `<basedir>/<tenant>/<user>/<workspaceId>`. Absolute. */
  basedir: string;
  /** Environment for commands; HOME defaults to each workdir. */
  env?: Record<string, string>;
};

/**
 * The host-unconfined driver over `basedir`, for library use without workers: attaching without a stored
 * handle creates a missing folder. TRUSTED AGENTS ONLY: it does not sandbox commands.
 */
export function createHostFolderDriver(options: HostFolderOptions): WorkspaceDriver {
  return instantiateDriver(
    DRIVERS["host-unconfined"],
    { env: options.env ?? {} },
    { basedir: options.basedir, cwd: process.cwd(), uid: process.getuid?.() ?? -1 },
  );
}

/**
 * A WorkspaceManager over host directories `<basedir>/<tenant>/<user>/<workspaceId>` (never keyed by agent
 * id alone: reference issue #2107) through `createHostFolderDriver`. TRUSTED AGENTS ONLY.
 */
export function createLocalWorkspaceManager(
  options: HostFolderOptions & Omit<WorkspaceManagerOptions, "attacher">,
): WorkspaceManager {
  const { basedir, env, ...managerOptions } = options;
  const driver = createHostFolderDriver(env === undefined ? { basedir } : { basedir, env });
  return new WorkspaceManager({ ...managerOptions, attacher: attachThrough(driver) });
}
