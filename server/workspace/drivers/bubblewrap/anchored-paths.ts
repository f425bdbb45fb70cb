import fsp from "node:fs/promises";
import path from "node:path";
import { AppError } from "@/server/shared/errors";
import { isInside } from "@/server/workspace/paths";

/**
 * Host file operations on a workspace folder that an agent's shell is changing at the same time. Berth
 * runs them as root on the host, so a path checked once and used later is not enough: the agent can swap
 * a directory for a symlink to `/etc` in between. Each operation instead opens the parent directory,
 * checks where the OPENED directory is (`/proc/self/fd/<fd>`), and goes on through that fd
 * (`/proc/self/fd/<fd>/<name>`): the kernel resolves that link to the opened directory itself, so no later
 * rename or symlink can redirect the operation. The last component is never followed by the callers
 * (rename, link, lchown, lstat, unlink and O_NOFOLLOW opens act on a symlink itself).
 */
export async function withAnchoredParent<T>(
  hostRoot: string,
  hostTarget: string,
  operation: (anchored: string) => Promise<T>,
): Promise<T> {
  // The workspace folder itself: its parent is Berth's (0711), so the agent cannot swap it; and its anchor
  // would be the fd's magic link, which lstat reports as a symlink.
  if (hostTarget === hostRoot) return operation(hostRoot);
  return withAnchoredDir(hostRoot, path.dirname(hostTarget), (dir) =>
    operation(path.join(dir, path.basename(hostTarget))),
  );
}

/** The same for a directory itself (listing it): `operation` gets a path to the opened directory. */
export async function withAnchoredDir<T>(
  hostRoot: string,
  hostDir: string,
  operation: (anchored: string) => Promise<T>,
): Promise<T> {
  const handle = await fsp.open(hostDir, fsp.constants.O_RDONLY | fsp.constants.O_DIRECTORY);
  try {
    const anchored = `/proc/self/fd/${handle.fd}`;
    const opened = await fsp.readlink(anchored);
    if (!isInside(hostRoot, opened)) {
      throw new AppError("FORBIDDEN", "Path escapes the workspace (a symlink was swapped in)", {
        details: { path: path.relative(hostRoot, hostDir) },
      });
    }
    return await operation(anchored);
  } finally {
    await handle.close();
  }
}

/**
 * `mkdir -p` inside the workspace, one anchored level at a time. Returns the first directory it created
 * (as a host path), like fs.mkdir's recursive mode, or undefined when all existed.
 */
export async function mkdirAnchored(hostRoot: string, hostTarget: string): Promise<string | undefined> {
  const relative = path.relative(hostRoot, hostTarget);
  if (relative === "") return undefined;
  let current = hostRoot;
  let created: string | undefined;
  for (const segment of relative.split(path.sep)) {
    const next = path.join(current, segment);
    await withAnchoredParent(hostRoot, next, async (anchored) => {
      try {
        await fsp.mkdir(anchored);
        created ??= next;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
    });
    current = next;
  }
  return created;
}
