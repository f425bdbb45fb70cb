import fs from "node:fs/promises";

/**
 * The identity of a workspace's host folder: its device and inode, taken when the container is created for
 * it (a container label) and when a backend attaches. A folder deleted outside Berth has none (null); one
 * recreated under the same path by someone else has another: neither holds the workspace's data, and the
 * container keeps running on the deleted one (Docker binds the inode, not the path), so both mean the
 * workspace's files vanished (see server/workspace/drivers/vanished.ts).
 */
export async function hostFolderIdentity(folder: string): Promise<string | null> {
  try {
    // bigint: inode numbers may exceed 2^53 (XFS, btrfs).
    const info = await fs.stat(folder, { bigint: true });
    return info.isDirectory() ? `${info.dev}:${info.ino}` : null;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    throw error;
  }
}

/**
 * False only when the folder provably is not the one `identity` names (gone or replaced). A folder this
 * process cannot stat (EACCES, an I/O error) is not declared lost on that alone: the operation itself fails.
 */
export async function isSameHostFolder(folder: string, identity: string): Promise<boolean> {
  try {
    return (await hostFolderIdentity(folder)) === identity;
  } catch {
    return true;
  }
}
