import { encodeTree } from "@/server/workspace/checkpoints/tree";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";

/**
 * Which turn checkpoints a tenant keeps. A workspace keeps its newest READY checkpoint always (the next
 * turn's base, and the state a user reverts to most); the others while they are among the last
 * `keepTurns` of their workspace AND younger than `keepDays`; then, newest first across the tenant, as
 * many as fit in `storageBytes` of deduplicated store bytes (what the objects they reach weigh once each).
 */
const CHECKPOINT_RETENTION_DEFAULTS = { keepTurns: 100, keepDays: 30 } as const;

export type RetentionPolicy = { keepTurns: number; keepDays: number; storageBytes: number | null };

export type RetentionRow = {
  id: string;
  workspaceId: string;
  status: "READY" | "FAILED";
  rootTree: string | null;
  baseTree: string | null;
  createdAt: Date;
};

export function retentionPolicyOf(tenant: {
  checkpointKeepTurns: number | null;
  checkpointKeepDays: number | null;
  checkpointStorageBytes: bigint | number | null;
}): RetentionPolicy {
  return {
    keepTurns: tenant.checkpointKeepTurns ?? CHECKPOINT_RETENTION_DEFAULTS.keepTurns,
    keepDays: tenant.checkpointKeepDays ?? CHECKPOINT_RETENTION_DEFAULTS.keepDays,
    storageBytes: tenant.checkpointStorageBytes === null ? null : Number(tenant.checkpointStorageBytes),
  };
}

/**
 * Splits `rows` by count and age: `pinned` (each workspace's newest READY one, and any `held` by a
 * running restore), `kept` (within policy, newest first) and `expired`. FAILED rows hold no files; they
 * stay while young enough, so the dashboard can say a turn's checkpoint failed.
 */
export function splitByPolicy(
  rows: readonly RetentionRow[],
  policy: Pick<RetentionPolicy, "keepTurns" | "keepDays">,
  now: Date,
  held: ReadonlySet<string> = new Set(),
): { pinned: RetentionRow[]; kept: RetentionRow[]; expired: RetentionRow[] } {
  const oldest = now.getTime() - policy.keepDays * 86_400_000;
  const newestFirst = [...rows].sort(
    (a, b) => b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? 1 : -1),
  );
  const rank = new Map<string, number>();
  const pinned: RetentionRow[] = [];
  const kept: RetentionRow[] = [];
  const expired: RetentionRow[] = [];
  for (const row of newestFirst) {
    if (row.status === "FAILED") {
      (row.createdAt.getTime() >= oldest ? kept : expired).push(row);
      continue;
    }
    const position = rank.get(row.workspaceId) ?? 0;
    rank.set(row.workspaceId, position + 1);
    if (position === 0 || held.has(row.id)) pinned.push(row);
    else if (position < policy.keepTurns && row.createdAt.getTime() >= oldest) kept.push(row);
    else expired.push(row);
  }
  return { pinned, kept, expired };
}

/** Trees read between two yields to the event loop (cached trees resolve without any I/O). */
const TREES_PER_YIELD = 256;

/**
 * The objects a set of checkpoints reaches, each counted once (hash → bytes). `reach` adds one
 * checkpoint's root and base trees (its diff needs the base) and returns the bytes it added that were
 * not reached already, without committing them when `commit` is false.
 */
export class ReachableObjects {
  readonly objects = new Map<string, number>();
  private bytes = 0;
  private walked = 0;

  constructor(
    private readonly store: CheckpointStore,
    private readonly tenantId: string,
  ) {}

  get totalBytes(): number {
    return this.bytes;
  }

  async reach(row: RetentionRow, commit: (addedBytes: number) => boolean = () => true): Promise<boolean> {
    const found = new Map<string, number>();
    const stack = [row.rootTree, row.baseTree].filter((hash): hash is string => hash !== null);
    while (stack.length > 0) {
      const hash = stack.pop()!;
      if (this.objects.has(hash) || found.has(hash)) continue;
      const tree = await this.store.readTree(this.tenantId, hash);
      found.set(hash, encodeTree(tree.entries).bytes.length);
      for (const entry of tree.entries) {
        if (entry.type === "dir") stack.push(entry.hash);
        else if (entry.type === "file" && !this.objects.has(entry.hash)) found.set(entry.hash, entry.size);
      }
      this.walked += 1;
      if (this.walked % TREES_PER_YIELD === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    let added = 0;
    for (const size of found.values()) added += size;
    if (!commit(added)) return false;
    for (const [hash, size] of found) this.objects.set(hash, size);
    this.bytes += added;
    return true;
  }
}
