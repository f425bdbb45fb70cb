import type { CheckpointStore } from "./checkpoint-store";
import { type CaptureIndex, folderHash, parentOf } from "./capture-index";
import type { ListedEntry } from "./machine-listing";
import { encodeTree, type TreeEntry } from "./tree";

/**
 * The trees of a capture, written only for the folders that changed ("dirty": an entry of theirs was added,
 * changed or removed, or a subfolder's tree changed). Every other folder keeps its tree from the index, so
 * a turn that changed k files encodes, hashes and writes the trees on those k paths, whatever n is.
 */
export type TreeChanges = {
  /** Entries of the listing that differ from the index (new, another type, mode, size, mtime, target). */
  changed: readonly ListedEntry[];
  /** Blobs of the files read; a changed file without one was skipped (gone mid-capture). */
  read: ReadonlyMap<string, { hash: string; size: number }>;
  /** Whether entries may have been removed: then folders are counted and dirty ones rebuilt from the listing. */
  maybeRemoved: boolean;
};

export async function updateTrees(
  store: CheckpointStore,
  tenantId: string,
  listing: readonly ListedEntry[],
  index: CaptureIndex,
  changes: TreeChanges,
  onStored: (bytes: number) => void,
): Promise<string> {
  const dirty = new Set<string>();
  for (const entry of changes.changed) {
    dirty.add(parentOf(entry.path));
    if (entry.type === "dir" && index.entries.get(entry.path)?.type !== "dir") dirty.add(entry.path);
  }
  let counts: Map<string, number> | null = null;
  if (changes.maybeRemoved) {
    counts = new Map<string, number>([["", 0]]);
    for (const entry of listing) {
      const parent = parentOf(entry.path);
      counts.set(parent, (counts.get(parent) ?? 0) + 1);
      if (entry.type === "dir" && !counts.has(entry.path)) counts.set(entry.path, 0);
    }
    for (const [folder, count] of index.counts) if (counts.get(folder) !== count) dirty.add(folder);
    for (const [folder, count] of counts) if (index.counts.get(folder) !== count) dirty.add(folder);
  }
  if (dirty.size === 0 && index.root) return index.root;
  dirty.add("");
  for (const folder of [...dirty])
    for (let up = folder; up !== "";) {
      up = parentOf(up);
      dirty.add(up);
    }

  const children = new Map<string, TreeEntry[]>();
  const entryOf = (entry: ListedEntry, name: string): TreeEntry | null => {
    if (entry.type === "symlink") return { name, type: "symlink", target: entry.target };
    const before = index.entries.get(entry.path);
    if (entry.type === "dir") {
      // A dirty folder's entry is added when its tree is written (below).
      if (dirty.has(entry.path)) return null;
      if (before?.type !== "dir") return null; // a new folder is dirty: never here
      return before.mode === entry.mode ? before : { ...before, name, mode: entry.mode };
    }
    const blob = changes.read.get(entry.path);
    if (blob)
      return {
        name,
        type: "file",
        mode: entry.mode,
        size: blob.size,
        mtimeMs: entry.mtimeMs,
        hash: blob.hash,
      };
    if (before?.type !== "file" || before.size !== entry.size || before.mtimeMs !== entry.mtimeMs)
      return null;
    return before.mode === entry.mode ? before : { ...before, name, mode: entry.mode };
  };
  const removed: string[] = [];
  if (counts) {
    // Entries may be gone: each dirty folder is rebuilt from the listing.
    for (const folder of dirty) if (folder === "" || counts.has(folder)) children.set(folder, []);
    for (const entry of listing) {
      const parent = parentOf(entry.path);
      const siblings = children.get(parent);
      if (!siblings) continue;
      const built = entryOf(entry, entry.path.slice(parent === "" ? 0 : parent.length + 1));
      if (built) siblings.push(built);
      else if (entry.type !== "dir") removed.push(entry.path);
    }
  } else {
    // Only changes in place: a dirty folder is its stored tree with the changed entries replaced.
    const changedBy = new Map<string, ListedEntry>(changes.changed.map((entry) => [entry.path, entry]));
    for (const folder of dirty) {
      const hash = folderHash(index, folder);
      const tree = hash ? await store.readTree(tenantId, hash) : { entries: [] };
      const prefix = folder === "" ? "" : `${folder}/`;
      const list: TreeEntry[] = [];
      for (const before of tree.entries) {
        const path = prefix + before.name;
        if (before.type === "dir" && dirty.has(path)) continue;
        const entry = changedBy.get(path);
        const built = entry ? entryOf(entry, before.name) : before;
        if (built) list.push(built);
        else removed.push(path);
      }
      children.set(folder, list);
    }
  }

  // Write the dirty folders' trees, deepest first, each added to its parent's entries with its new hash.
  const depth = (folder: string) => (folder === "" ? 0 : folder.split("/").length);
  const order = [...children.keys()].sort((a, b) => depth(b) - depth(a));
  const modes = new Map<string, number>();
  for (const entry of changes.changed) if (entry.type === "dir") modes.set(entry.path, entry.mode);
  let root = "";
  const writes: Promise<void>[] = [];
  for (const folder of order) {
    const entries = children.get(folder)!;
    const { bytes, hash } = encodeTree(entries);
    // Hashes are known at once; the store writes run side by side.
    writes.push(
      store.putTree(tenantId, hash, bytes).then((stored) => {
        if (stored) onStored(bytes.length);
      }),
    );
    for (const entry of entries)
      index.entries.set(folder === "" ? entry.name : `${folder}/${entry.name}`, entry);
    if (folder === "") {
      root = hash;
      continue;
    }
    const before = index.entries.get(folder);
    const mode = modes.get(folder) ?? (before?.type === "dir" ? before.mode : 0o755);
    const name = folder.slice(folder.lastIndexOf("/") + 1);
    const dirEntry: TreeEntry = { name, type: "dir", mode, hash };
    index.entries.set(folder, dirEntry);
    children.get(parentOf(folder))?.push(dirEntry);
  }
  await Promise.all(writes);
  forget(index, removed, children, counts);
  if (counts) index.counts = counts;
  for (const [folder, entries] of children) index.counts.set(folder, entries.length);
  index.root = root;
  return root;
}

/**
 * Drops from the index what the new trees no longer hold: paths a rebuilt folder lacks, and everything
 * under a folder that is gone. Without removals, only the changed files that were skipped.
 */
function forget(
  index: CaptureIndex,
  removed: readonly string[],
  children: ReadonlyMap<string, TreeEntry[]>,
  counts: Map<string, number> | null,
): void {
  if (!counts) {
    for (const path of removed) index.entries.delete(path);
    return;
  }
  const kept = new Set<string>();
  for (const [folder, entries] of children)
    for (const entry of entries) kept.add(folder === "" ? entry.name : `${folder}/${entry.name}`);
  for (const path of [...index.entries.keys()]) {
    const parent = parentOf(path);
    if (children.has(parent) ? !kept.has(path) : parent !== "" && !counts.has(parent))
      index.entries.delete(path);
  }
}
