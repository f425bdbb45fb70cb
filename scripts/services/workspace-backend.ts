import { chmod, constants, mkdir, stat } from "node:fs/promises";
import path from "node:path";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { createDriverSet } from "@/server/engine/driver-set";

/** Why `npm start` refuses to boot on the configured workspace backend. */
export class WorkspaceBackendUnavailableError extends Error {}

/**
 * The boot check of `npm start`: every enabled backend's driver checks that it works on this machine (the
 * default `local` backend runs one tiny bubblewrap sandbox), and Berth refuses to start when one does not,
 * saying what to install or configure. Config errors (host-unconfined as root without the second
 * variable) surface as thrown AppErrors.
 */
export async function checkWorkspaceBackend(say: (line: string) => void): Promise<void> {
  const config = loadEngineConfig();
  const drivers = createDriverSet(config);
  try {
    // Host-folder sandboxes run as per-workspace uids that must reach the base dir.
    if (drivers.all.some((driver) => driver.capabilities.hostPaths && driver.capabilities.isolated)) {
      await ensureTraversableByOthers(config.basedir, say);
    }
    for (const driver of drivers.all) {
      const probe = await driver.probe?.();
      if (!probe) continue;
      if (!probe.ok) throw new WorkspaceBackendUnavailableError(`${probe.reason}.\n${probe.hint}`);
      say(`workspaces (${driver.name}${driver === drivers.default ? ", default" : ""}): ${probe.summary}`);
    }
  } finally {
    await drivers.close();
  }
}

/**
 * As root, sandboxed commands run as per-workspace uids, which must be able to reach their workspace: every
 * folder above the base directory needs the search bit for others (o+x: search only, it does not make a
 * folder listable). A fresh clone under a 0700 home folder lacks it, so `npm start` adds it where missing
 * and says so, as it does for the embedded PostgreSQL.
 */
async function ensureTraversableByOthers(basedir: string, say: (line: string) => void): Promise<void> {
  if (process.getuid?.() !== 0) return;
  const resolved = path.resolve(basedir);
  await mkdir(resolved, { recursive: true, mode: 0o711 });
  for (let dir = resolved; ; dir = path.dirname(dir)) {
    const info = await stat(dir);
    if (!(info.mode & constants.S_IXOTH)) {
      await chmod(dir, info.mode | constants.S_IXOTH);
      say(`made ${dir} traversable (o+x) so sandboxed workspace users can reach their workspace`);
    }
    if (dir === path.dirname(dir)) break;
  }
}
