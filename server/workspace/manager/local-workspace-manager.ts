import {
  LocalBackendProvider,
  type LocalBackendProviderOptions,
} from "@/server/workspace/backends/local/local-provider";
import { WorkspaceManager, type WorkspaceManagerOptions } from "./workspace-manager";

/**
 * A WorkspaceManager over host directories `<basedir>/<tenant>/<user>/<workspaceId>` (never keyed by agent
 * id alone: reference issue #2107). TRUSTED AGENTS ONLY: the local backend does not sandbox commands.
 */
export function createLocalWorkspaceManager(
  options: LocalBackendProviderOptions & Omit<WorkspaceManagerOptions, "provider">,
): WorkspaceManager {
  const { basedir, env, ...managerOptions } = options;
  const provider = new LocalBackendProvider(env === undefined ? { basedir } : { basedir, env });
  return new WorkspaceManager({ ...managerOptions, provider });
}
