import type { Dirent } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";

/**
 * A machine's resource use at one moment, each figure null where its backend cannot tell. `cpuSeconds` is
 * cumulative CPU time (a cgroup's or a container's), so a rate comes from two samples; it restarts from
 * zero when the machine does. `cpuPercent` is for backends that only report a rate they averaged
 * themselves (the Kubernetes metrics API, E2B's sandbox metrics): percent of one core, over their window.
 */
export type MachineUsage = {
  cpuSeconds: number | null;
  cpuPercent?: number | null;
  memoryBytes: number | null;
  diskBytes: number | null;
  processes: number | null;
};

/**
 * Bytes a folder takes on disk (allocated blocks, as `du` counts them), walking at most `maxEntries`
 * entries: null past that (a figure for part of a tree would read as a drop), or when the folder is gone.
 * Symbolic links are not followed; hard links count once per name.
 */
export async function directoryBytes(root: string, maxEntries = 200_000): Promise<number | null> {
  let total = 0;
  let seen = 0;
  const pending = [root];
  while (pending.length > 0) {
    const dir = pending.pop()!;
    let entries: Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      if (dir === root) return null;
      // A folder removed mid-walk (a command deleting it): what remains is still the figure.
      continue;
    }
    for (const entry of entries) {
      if (++seen > maxEntries) return null;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) pending.push(full);
      const stat = await fs.lstat(full).catch(() => null);
      if (stat) total += stat.blocks * 512;
    }
  }
  return total;
}
