import fs from "node:fs/promises";
import path from "node:path";
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
