import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "@/server/shared/errors";
import { isInside } from "@/server/workspace/paths";

/** mkdir -p `dir` (below `root`) with every level from `root` down made traverse-only for others. */
export async function traversableTree(root: string, dir: string): Promise<void> {
  await fs.mkdir(dir, { recursive: true, mode: 0o711 });
  for (let current = dir; ; current = path.dirname(current)) {
    const info = await fs.stat(current);
    if ((info.mode & 0o001) === 0 && info.uid === process.getuid?.()) {
      await fs.chmod(current, (info.mode & 0o7777) | 0o001);
    }
    if (current === root || !isInside(root, current)) return;
  }
}

const traversable = new Map<string, Promise<void>>();

/**
 * bwrap runs as the workspace uid and must walk the host path to the folders it mounts: every parent of
 * `dir` must let "others" through (o+x). Checked once per folder; the error says what to change instead
 * of bwrap's "Can't find source path … Permission denied" at the first command.
 */
export function assertTraversable(dir: string): Promise<void> {
  let checked = traversable.get(dir);
  if (!checked) {
    checked = (async () => {
      for (let current = path.dirname(dir); ; current = path.dirname(current)) {
        const info = await fs.stat(current);
        if ((info.mode & 0o001) === 0) {
          throw new AppError(
            "INTERNAL",
            `Workspace sandboxes cannot reach ${dir}: ${current} is not traversable by other users. ` +
              `Run \`chmod o+x ${current}\` (search only, it does not make anything listable) or move ` +
              "BERTH_WORKSPACE_BASEDIR somewhere that is.",
            { userMessage: "The workspace backend is misconfigured" },
          );
        }
        if (current === "/") return;
      }
    })();
    checked.catch(() => traversable.delete(dir));
    traversable.set(dir, checked);
  }
  return checked;
}

/**
 * As root, sandboxed commands run as per-workspace uids, which must be able to reach their workspace: every
 * folder above the base directory needs the search bit for others (o+x: search only, it does not make a
 * folder listable). A fresh clone under a 0700 home folder lacks it, so the boot check adds it where missing
 * and says where (returned), as `npm start` does for the embedded PostgreSQL.
 */
export async function makeSearchableUpwards(basedir: string): Promise<string[]> {
  if (process.getuid?.() !== 0) return [];
  const changed: string[] = [];
  const resolved = path.resolve(basedir);
  await fs.mkdir(resolved, { recursive: true, mode: 0o711 });
  for (let dir = resolved; ; dir = path.dirname(dir)) {
    const info = await fs.stat(dir);
    if (!(info.mode & fs.constants.S_IXOTH)) {
      await fs.chmod(dir, info.mode | fs.constants.S_IXOTH);
      changed.push(dir);
    }
    if (dir === path.dirname(dir)) break;
  }
  return changed;
}
