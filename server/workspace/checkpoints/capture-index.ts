import type { CheckpointStore } from "./checkpoint-store";
import type { ListedEntry } from "./machine-listing";
import type { TreeEntry } from "./tree";

/**
 * The previous checkpoint as the next capture needs it, like git's index: every entry by path (a file's
 * size and mtime decide whether it is read again; a folder's entry carries its tree hash) and how many
 * entries each folder holds (a folder whose count changed lost or gained some). It is kept in this
 * process' memory for the root a capture returned, so the workspace's next turn here reads no tree from the
 * store; another process, or a root no longer cached, loads it from the store's trees. A capture TAKES the
 * index it starts from (out of the cache) and updates it in place, so a failed capture leaves none behind.
 */
export type CaptureIndex = {
  root: string;
  entries: Map<string, TreeEntry>;
  /** Entries per folder ("" is the root folder). */
  counts: Map<string, number>;
  /**
   * The listing this index was built from, in the walk's order (null when loaded from the store, or when
   * a file of it was skipped): the next walk lists unchanged folders in the same order, so an entry is
   * compared with the one at its position first, without a lookup by path.
   */
  listing: readonly ListedEntry[] | null;
};

/** Indexes kept per store (a root of one store says nothing about another's objects), most recent last. */
const CACHED_INDEXES = 8;
const cache = new WeakMap<CheckpointStore, Map<string, CaptureIndex>>();

export function emptyIndex(): CaptureIndex {
  return { root: "", entries: new Map(), counts: new Map(), listing: null };
}

export function rememberIndex(store: CheckpointStore, tenantId: string, index: CaptureIndex): void {
  let indexes = cache.get(store);
  if (!indexes) cache.set(store, (indexes = new Map<string, CaptureIndex>()));
  const key = `${tenantId}/${index.root}`;
  indexes.delete(key);
  indexes.set(key, index);
  if (indexes.size > CACHED_INDEXES) indexes.delete(indexes.keys().next().value!);
}

/** The index of checkpoint `root`, the caller's to change: out of this process' cache, else from the store. */
export async function takeIndex(
  store: CheckpointStore,
  tenantId: string,
  root: string,
): Promise<CaptureIndex> {
  const key = `${tenantId}/${root}`;
  const cached = cache.get(store)?.get(key);
  if (cached) {
    cache.get(store)!.delete(key);
    return cached;
  }
  const index: CaptureIndex = { root, entries: new Map(), counts: new Map(), listing: null };
  const load = async (folder: string, hash: string): Promise<void> => {
    const tree = await store.readTree(tenantId, hash);
    index.counts.set(folder, tree.entries.length);
    const prefix = folder === "" ? "" : `${folder}/`;
    const subfolders: Promise<void>[] = [];
    for (const entry of tree.entries) {
      index.entries.set(prefix + entry.name, entry);
      if (entry.type === "dir") subfolders.push(load(prefix + entry.name, entry.hash));
    }
    await Promise.all(subfolders);
  };
  await load("", root);
  return index;
}

/** The tree hash of a folder of the index ("" is the root). */
export function folderHash(index: CaptureIndex, folder: string): string | null {
  if (folder === "") return index.root || null;
  const entry = index.entries.get(folder);
  return entry?.type === "dir" ? entry.hash : null;
}

export function parentOf(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash === -1 ? "" : path.slice(0, slash);
}
