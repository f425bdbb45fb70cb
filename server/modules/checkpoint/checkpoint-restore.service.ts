import { resolveSystemTenantScope } from "@/server/auth/resolve";
import type { Logger } from "@/server/logger";
import { announceChange } from "@/server/modules/live/change-feed";
import type { WorkspaceService } from "@/server/modules/workspace/workspace.service";
import { restoreLeaseHolder } from "@/server/modules/workspace/workspace-lifecycle.data";
import { isAppError } from "@/server/shared/errors";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { restoreCheckpoint } from "@/server/workspace/checkpoints/restore";
import { finishRestore, getCheckpoint, getRestore } from "./checkpoint.data";

export type RestoreJobDeps = {
  workspaces: Pick<WorkspaceService, "withLease">;
  store: CheckpointStore;
};

/**
 * The workers' half of a revert or fork: under the restore's own lease (the only one the workspace
 * grants while restoring), attach the machine (provisioning a fork's new one), write the checkpoint's
 * files, then end the restore, which frees the workspace. A failure that will not pass (the checkpoint's
 * objects are gone) ends it FAILED at once; others are retried by the queue, and the last attempt's
 * failure ends it FAILED too (`isLastAttempt`).
 */
export async function runCheckpointRestore(
  deps: RestoreJobDeps,
  payload: { tenantId: string; restoreId: string },
  log: Pick<Logger, "warn">,
  options: { isLastAttempt: boolean; signal?: AbortSignal | undefined },
): Promise<{ written: number; deleted: number } | { skipped: string }> {
  const scope = await resolveSystemTenantScope(payload.tenantId);
  const restore = await getRestore(scope, payload.restoreId);
  if (restore.status !== "RUNNING") return { skipped: `restore is ${restore.status}` };
  const checkpoint = await getCheckpoint(scope, restore.checkpointId);
  try {
    if (!checkpoint.rootTree) throw new Error("the checkpoint has no tree (it failed)");
    const root = checkpoint.rootTree;
    const result = await deps.workspaces.withLease(
      scope,
      restore.workspaceId,
      { holder: restoreLeaseHolder(restore.id), reason: `checkpoint ${restore.kind.toLowerCase()}` },
      (workspace) =>
        restoreCheckpoint({
          machine: workspace.machine,
          store: deps.store,
          tenantId: scope.tenantId,
          root,
          ...(options.signal ? { signal: options.signal } : {}),
        }),
    );
    await finishRestore(scope, restore.id, {
      status: "DONE",
      written: result.written,
      deleted: result.deleted,
    });
    announceChange(scope.tenantId, { topic: "session", id: restore.sessionId, userId: null });
    return { written: result.written, deleted: result.deleted };
  } catch (error) {
    const permanent = isAppError(error) ? !error.isRetryable : !checkpoint.rootTree;
    if (permanent || options.isLastAttempt) {
      log.warn({ err: error, restoreId: restore.id }, "a checkpoint restore failed");
      const reason = error instanceof Error ? error.message : String(error);
      await finishRestore(scope, restore.id, { status: "FAILED", error: reason.slice(0, 1_000) });
      announceChange(scope.tenantId, { topic: "session", id: restore.sessionId, userId: null });
      return { skipped: "failed" };
    }
    throw error;
  }
}
