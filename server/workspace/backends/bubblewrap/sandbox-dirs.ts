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
