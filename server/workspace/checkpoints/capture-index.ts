import type { CheckpointStore } from "./checkpoint-store";
import type { FileEntry, TreeEntry } from "./tree";

/**
 * What the next capture needs from the previous checkpoint, by path: each file's entry (size and mtime
 * decide whether it is read again) and each folder's entries and tree hash (a folder whose entries are the
 * same keeps its tree: no encoding, hashing or store write). Like git's index, it is kept in memory for the
 * root a capture returns, so a workspace's next turn on this process reads no tree from the store; any other
 * process, or a root no longer cached, loads it from the store's trees.
 */
export type CaptureIndex = {
  files: Map<string, FileEntry>;
  /** "" is the root folder. Entries sorted by name, as stored. */
  folders: Map<string, { entries: readonly TreeEntry[]; hash: string }>;
};

/** Indexes kept per store (a root of one store says nothing about another's objects), most recent last. */
const CACHED_INDEXES = 8;
const cache = new WeakMap<CheckpointStore, Map<string, CaptureIndex>>();

export function rememberIndex(store: CheckpointStore, tenantId: string, root: string, index: CaptureIndex): void {
  let indexes = cache.get(store);
  if (!indexes) cache.set(store, (indexes = new Map()));
  const key = `${tenantId}/${root}`;
  indexes.delete(key);
  indexes.set(key, index);
  if (indexes.size > CACHED_INDEXES) indexes.delete(indexes.keys().next().value!);
}

/** The index of checkpoint `root`: from this process' cache, else from the store's trees. */
export async function indexOf(store: CheckpointStore, tenantId: string, root: string): Promise<CaptureIndex> {
  const cached = cache.get(store)?.get(`${tenantId}/${root}`);
  if (cached) return cached;
  const index: CaptureIndex = { files: new Map(), folders: new Map() };
  const load = async (folder: string, hash: string): Promise<void> => {
    const tree = await store.readTree(tenantId, hash);
    index.folders.set(folder, { entries: tree.entries, hash });
    const prefix = folder === "" ? "" : `${folder}/`;
    const subfolders: Promise<void>[] = [];
    for (const entry of tree.entries) {
      if (entry.type === "file") index.files.set(prefix + entry.name, entry);
      else if (entry.type === "dir") subfolders.push(load(prefix + entry.name, entry.hash));
    }
    await Promise.all(subfolders);
  };
  await load("", root);
  return index;
}

/** Same entries, field by field (both sorted by name): the folder's tree would encode to the same bytes. */
export function sameEntries(a: readonly TreeEntry[], b: readonly TreeEntry[]): boolean {
  if (a.length !== b.length) return false;
  for (let at = 0; at < a.length; at++) {
    const left = a[at]!;
    const right = b[at]!;
    if (left.name !== right.name || left.type !== right.type) return false;
    if (left.type === "file" && right.type === "file") {
      if (
        left.hash !== right.hash ||
        left.mode !== right.mode ||
        left.size !== right.size ||
        left.mtimeMs !== right.mtimeMs
      )
        return false;
    } else if (left.type === "dir" && right.type === "dir") {
      if (left.hash !== right.hash || left.mode !== right.mode) return false;
    } else if (left.type === "symlink" && right.type === "symlink") {
      if (left.target !== right.target) return false;
    }
  }
  return true;
}

/** The order encodeTree stores entries in. */
export function byName(a: TreeEntry, b: TreeEntry): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
