import { chmod, constants, mkdir, stat } from "node:fs/promises";
import path from "node:path";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { probeSandbox } from "@/server/workspace/backends/bubblewrap/sandbox-probe";

/** Why `npm start` refuses to boot on the configured workspace backend. */
export class WorkspaceBackendUnavailableError extends Error {}

/**
 * The boot check of `npm start`: the default `local` backend confines every agent command with
 * bubblewrap, so it runs one tiny sandbox first and refuses to start when that fails (saying what to
 * install, or how to opt in to the unconfined mode). Config errors (host-unconfined as root without the
 * second variable) surface as thrown AppErrors.
 */
export async function checkWorkspaceBackend(say: (line: string) => void): Promise<void> {
  const config = loadEngineConfig();
  if (config.backend === "host-unconfined") {
    say(
      "WARNING: BERTH_WORKSPACE_BACKEND=host-unconfined: agent commands and MCP servers run on this host " +
        "with Berth's privileges. Trusted agents only.",
    );
    return;
  }
  if (config.backend !== "local") return;
  await ensureTraversableByOthers(config.basedir, say);
  const probe = await probeSandbox(config.sandbox ?? {}, { basedir: config.basedir });
  if (!probe.ok) {
    throw new WorkspaceBackendUnavailableError(
      `the confined workspace backend (bubblewrap) does not work here: ${probe.reason}.\n${probe.hint}`,
    );
  }
  say(
    `workspaces: confined by bubblewrap (commands run as ${probe.dropped ? "a per-workspace uid" : `uid ${probe.uid} in a user namespace`})`,
  );
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
