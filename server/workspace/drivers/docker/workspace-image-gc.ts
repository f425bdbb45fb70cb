import type Docker from "dockerode";
import { LABELS } from "./docker-config";

export type ImagePruneOptions = {
  /** The workspace image repository (`berth-workspace`); other repositories are never touched. */
  repository: string;
  /** Tags to keep whatever their age: the current one, those being built. */
  keepTags: readonly string[];
  /** Only images at least this old are removed. */
  minAgeMs: number;
  /** Report what would be removed, remove nothing. */
  dryRun?: boolean;
  now?: () => number;
};

/**
 * Removes workspace images nothing needs any more. Every change of Berth's gateway or of the image config
 * makes a new hash-tagged image (~330 MB on Debian) and leaves the old one behind. An image is removed
 * when it carries Berth's label and the repository's name, is not in `keepTags`, no container uses it
 * (running or stopped: a stopped workspace restarts on its own image) and it is at least `minAgeMs` old
 * (a fresh one may be about to get its container). Removal is by tag, so an image that also carries some
 * other tag only loses this one; an image that got a container meanwhile is refused by the engine (409)
 * and kept. Returns the tags removed (or, on a dry run, those that would be).
 */
export async function pruneWorkspaceImages(docker: Docker, options: ImagePruneOptions): Promise<string[]> {
  const now = options.now ?? Date.now;
  const images = await docker.listImages({ filters: { label: [`${LABELS.managed}=true`] } });
  const containers = await docker.listContainers({ all: true });
  const inUse = new Set(containers.map((container) => container.ImageID));
  const keep = new Set(options.keepTags);
  const removed: string[] = [];
  for (const image of images) {
    if (inUse.has(image.Id)) continue;
    if (now() - image.Created * 1000 < options.minAgeMs) continue;
    for (const tag of image.RepoTags ?? []) {
      if (!tag.startsWith(`${options.repository}:`) || keep.has(tag)) continue;
      if (!options.dryRun) {
        try {
          await docker.getImage(tag).remove();
        } catch (error) {
          const status = (error as { statusCode?: number }).statusCode;
          if (status === 409 || status === 404) continue; // in use since the listing, or already gone
          throw error;
        }
      }
      removed.push(tag);
    }
  }
  return removed;
}
