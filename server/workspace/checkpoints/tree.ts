import { createHash } from "node:crypto";
import { z } from "zod";

/**
 * A checkpoint's content model, git-like: a file is a BLOB (its bytes, named by their SHA-256), a folder is
 * a TREE (its sorted entries, named by the SHA-256 of their canonical JSON). A checkpoint is the hash of
 * the workdir's root tree. An unchanged file keeps its blob and an unchanged folder its tree, so storing a
 * turn that changed k files writes k blobs and the trees on their paths, whatever the workspace's size.
 */

const ZHash = z.string().regex(/^[0-9a-f]{64}$/);

const ZTreeEntry = z.discriminatedUnion("type", [
  z.object({
    name: z.string().min(1),
    type: z.literal("file"),
    /** Permission bits (0o755), not the file type. */
    mode: z.number().int().min(0).max(0o7777),
    size: z.number().int().min(0),
    /** Kept so the next checkpoint knows, from a stat walk alone, which files it need not read again. */
    mtimeMs: z.number(),
    hash: ZHash,
  }),
  z.object({
    name: z.string().min(1),
    type: z.literal("dir"),
    mode: z.number().int().min(0).max(0o7777),
    hash: ZHash,
  }),
  z.object({ name: z.string().min(1), type: z.literal("symlink"), target: z.string() }),
]);
export type TreeEntry = z.infer<typeof ZTreeEntry>;
export type FileEntry = Extract<TreeEntry, { type: "file" }>;

const ZTree = z.object({ v: z.literal(1), entries: z.array(ZTreeEntry) });
export type Tree = z.infer<typeof ZTree>;

function sha256Hex(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex");
}

/** The canonical bytes of a tree (entries sorted by name, fields in a fixed order) and their hash. */
export function encodeTree(entries: readonly TreeEntry[]): { bytes: Buffer; hash: string } {
  const sorted = [...entries].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const canonical = sorted.map((entry) => {
    switch (entry.type) {
      case "file":
        return {
          name: entry.name,
          type: entry.type,
          mode: entry.mode,
          size: entry.size,
          mtimeMs: entry.mtimeMs,
          hash: entry.hash,
        };
      case "dir":
        return { name: entry.name, type: entry.type, mode: entry.mode, hash: entry.hash };
      case "symlink":
        return { name: entry.name, type: entry.type, target: entry.target };
    }
  });
  const bytes = Buffer.from(JSON.stringify({ v: 1, entries: canonical }), "utf8");
  return { bytes, hash: sha256Hex(bytes) };
}

/** A file, folder or link of a checkpoint with its path from the workdir ("src/a.ts"). */
export type FlatEntry = TreeEntry & { path: string };

/** What changed between two trees, by path; folders only when they appear or go as a whole. */
export type TreeChange =
  | { kind: "added"; path: string; after: TreeEntry }
  | { kind: "removed"; path: string; before: TreeEntry }
  | { kind: "changed"; path: string; before: TreeEntry; after: TreeEntry };

export type TreeReader = (hash: string) => Promise<Tree>;

/**
 * The changes from tree `before` to tree `after` (either may be null: the empty tree). Subtrees whose
 * hashes are equal are skipped without being read, so the cost follows what changed.
 */
export async function diffTrees(
  read: TreeReader,
  before: string | null,
  after: string | null,
  prefix = "",
): Promise<TreeChange[]> {
  if (before === after) return [];
  const [left, right] = await Promise.all([
    before ? read(before) : { v: 1 as const, entries: [] },
    after ? read(after) : { v: 1 as const, entries: [] },
  ]);
  const byName = new Map(left.entries.map((entry) => [entry.name, entry]));
  const changes: TreeChange[] = [];
  for (const entry of right.entries) {
    const path = prefix + entry.name;
    const old = byName.get(entry.name);
    byName.delete(entry.name);
    if (!old) {
      changes.push(...(await expand(read, "added", path, entry)));
    } else if (old.type === "dir" && entry.type === "dir") {
      if (old.hash !== entry.hash) changes.push(...(await diffTrees(read, old.hash, entry.hash, `${path}/`)));
    } else if (old.type !== entry.type) {
      changes.push(
        ...(await expand(read, "removed", path, old)),
        ...(await expand(read, "added", path, entry)),
      );
    } else if (!sameContent(old, entry)) {
      changes.push({ kind: "changed", path, before: old, after: entry });
    }
  }
  for (const [name, old] of byName) changes.push(...(await expand(read, "removed", prefix + name, old)));
  return changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Same bytes (files), same target (links), same permission bits: a touched file did not change. */
function sameContent(a: TreeEntry, b: TreeEntry): boolean {
  if (a.type === "file" && b.type === "file") return a.hash === b.hash && a.mode === b.mode;
  if (a.type === "symlink" && b.type === "symlink") return a.target === b.target;
  return false;
}

/** An added or removed folder as its files, so a diff lists every file that came or went. */
async function expand(
  read: TreeReader,
  kind: "added" | "removed",
  path: string,
  entry: TreeEntry,
): Promise<TreeChange[]> {
  const own: TreeChange = kind === "added" ? { kind, path, after: entry } : { kind, path, before: entry };
  if (entry.type !== "dir") return [own];
  const inner =
    kind === "added"
      ? await diffTrees(read, null, entry.hash, `${path}/`)
      : await diffTrees(read, entry.hash, null, `${path}/`);
  return inner.length > 0 ? inner : [own];
}

/** Every entry of a tree, depth first, with paths (folders before their contents). */
export async function* walkTree(read: TreeReader, root: string, prefix = ""): AsyncGenerator<FlatEntry> {
  const tree = await read(root);
  for (const entry of tree.entries) {
    const path = prefix + entry.name;
    yield { ...entry, path };
    if (entry.type === "dir") yield* walkTree(read, entry.hash, `${path}/`);
  }
}

/**
 * Parsed trees by store key, the oldest dropped past `limit` (trees are immutable: a hash names one
 * content for ever, so a cached tree is never stale; pruned ones are forgotten by the store).
 */
export class TreeCache {
  private readonly trees = new Map<string, Tree>();

  constructor(private readonly limit = 4_096) {}

  get(key: string): Tree | undefined {
    return this.trees.get(key);
  }

  /** Parses a tree's stored bytes, remembers and returns it. */
  remember(key: string, bytes: Buffer): Tree {
    const tree = ZTree.parse(JSON.parse(bytes.toString("utf8")));
    if (this.trees.size >= this.limit) this.trees.delete(this.trees.keys().next().value!);
    this.trees.set(key, tree);
    return tree;
  }

  forget(key: string): void {
    this.trees.delete(key);
  }

  forgetPrefix(prefix: string): void {
    for (const key of this.trees.keys()) if (key.startsWith(prefix)) this.trees.delete(key);
  }
}
