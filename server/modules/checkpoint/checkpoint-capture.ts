import type { Db } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import { captureCheckpoint } from "@/server/workspace/checkpoints/capture";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { diffTrees, type TreeChange } from "@/server/workspace/checkpoints/tree";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { latestCheckpointTree } from "./checkpoint.data";

/**
 * The workspace's folder now, stored, as the columns of a READY checkpoint row: its tree, the tree it
 * compares with (the last checkpoint, or what the last revert or fork wrote), and the counts of files
 * and links added, changed and removed.
 */
export async function captureRowOf(
  store: CheckpointStore,
  scope: TenantScope,
  workspace: { machine: WorkspaceMachine; workspaceId: string; generation: number },
  signal: AbortSignal | undefined,
  db: Db,
) {
  const started = Date.now();
  const previous = await latestCheckpointTree(scope, workspace.workspaceId, workspace.generation, db);
  const captured = await captureCheckpoint({
    machine: workspace.machine,
    store,
    tenantId: scope.tenantId,
    previous,
    ...(signal ? { signal } : {}),
  });
  const changes = await fileChanges(store, scope.tenantId, previous, captured.root);
  return {
    status: "READY" as const,
    rootTree: captured.root,
    baseTree: previous,
    files: captured.stats.files,
    totalBytes: captured.stats.totalBytes,
    storedBytes: captured.stats.storedBytes,
    added: changes.filter((change) => change.kind === "added").length,
    changed: changes.filter((change) => change.kind === "changed").length,
    removed: changes.filter((change) => change.kind === "removed").length,
    durationMs: Date.now() - started,
  };
}

/**
 * What changed from `base` to `root` in files and links: a folder that came or went is in the tree
 * diff, but the counts, the agent's listing and the resume check name files.
 */
export async function fileChanges(
  store: CheckpointStore,
  tenantId: string,
  base: string | null,
  root: string,
): Promise<TreeChange[]> {
  const changes = await diffTrees((hash) => store.readTree(tenantId, hash), base, root);
  return changes.filter(
    (change) => (change.kind === "removed" ? change.before : change.after).type !== "dir",
  );
}
