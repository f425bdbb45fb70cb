import type { Db } from "@/server/db";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import type { Logger } from "@/server/logger";
import { announceChange } from "@/server/modules/live/change-feed";
import type { WorkspaceService } from "@/server/modules/workspace/workspace.service";
import { restoreLeaseHolder } from "@/server/modules/workspace/workspace-lifecycle.data";
import { isAppError } from "@/server/shared/errors";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { restoreCheckpoint, type RestoreProgress } from "@/server/workspace/checkpoints/restore";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import type { TenantScope } from "@/server/auth/scope";
import {
  finishRestore,
  getCheckpoint,
  getRestore,
  recordRestoreProgress,
  recordSafetyCheckpoint,
} from "./checkpoint.data";
import { captureRowOf } from "./checkpoint-capture";

export type RestoreJobDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
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
  const { db } = deps;
  const scope = await resolveSystemTenantScope(payload.tenantId, {}, db);
  const restore = await getRestore(scope, payload.restoreId, db);
  if (restore.status !== "RUNNING") return { skipped: `restore is ${restore.status}` };
  const checkpoint = await getCheckpoint(scope, restore.checkpointId, db);
  let safety: { id: string; root: string } | null = null;
  const progress = progressWriter(scope, restore.id, log, db);
  try {
    if (!checkpoint.rootTree) throw new Error("the checkpoint has no tree (it failed)");
    const root = checkpoint.rootTree;
    const result = await deps.workspaces.withLease(
      scope,
      restore.workspaceId,
      { holder: restoreLeaseHolder(restore.id), reason: `checkpoint ${restore.kind.toLowerCase()}` },
      async (workspace, record) => {
        if (restore.kind === "REVERT")
          safety = await safetyCheckpoint(deps, scope, restore, workspace.machine, record.generation, db);
        return restoreCheckpoint({
          machine: workspace.machine,
          store: deps.store,
          tenantId: scope.tenantId,
          root,
          ...(options.signal ? { signal: options.signal } : {}),
          onProgress: (reported) => progress.report(reported),
        });
      },
    );
    await progress.flushed();
    await finishRestore(
      scope,
      restore.id,
      {
        status: "DONE",
        written: result.written,
        deleted: result.deleted,
      },
      db,
    );
    announceChange(scope.tenantId, { topic: "session", id: restore.sessionId, userId: null });
    return { written: result.written, deleted: result.deleted };
  } catch (error) {
    const permanent = isAppError(error) ? !error.isRetryable : !checkpoint.rootTree;
    if (permanent || options.isLastAttempt) {
      log.warn({ err: error, restoreId: restore.id }, "a checkpoint restore failed");
      const reason = error instanceof Error ? error.message : String(error);
      const after = await putBack(deps, scope, restore, safety, log);
      await finishRestore(
        scope,
        restore.id,
        {
          status: "FAILED",
          error: `${reason}${after}`.slice(0, 1_000),
        },
        db,
      );
      announceChange(scope.tenantId, { topic: "session", id: restore.sessionId, userId: null });
      return { skipped: "failed" };
    }
    throw error;
  }
}

type RestoreOf = Awaited<ReturnType<typeof getRestore>>;

/** How often a restore's progress reaches its row (what `checkpoint.restore` answers while it runs). */
const PROGRESS_EVERY_MS = 1_000;

/**
 * Writes progress to the restore's row: the first and the last report, and at most one a second between,
 * one write at a time and in order. `flushed` waits for them (before the restore is ended, so its final
 * count is what the row says). A failed write is only logged: progress is advisory.
 */
function progressWriter(scope: TenantScope, restoreId: string, log: Pick<Logger, "warn">, db: Db) {
  let lastAt = 0;
  let writing: Promise<void> = Promise.resolve();
  return {
    report(progress: RestoreProgress) {
      const now = Date.now();
      if (progress.written !== progress.toWrite && now - lastAt < PROGRESS_EVERY_MS) return;
      lastAt = now;
      writing = writing.then(() =>
        recordRestoreProgress(scope, restoreId, progress, db).catch((error: unknown) =>
          log.warn({ err: error, restoreId }, "could not record a restore's progress"),
        ),
      );
    },
    flushed: () => writing,
  };
}

/**
 * The folder as it is before a revert writes anything, recorded once as a BEFORE_REVERT checkpoint: it
 * makes the revert undoable, and it is what a revert that cannot finish puts back.
 */
async function safetyCheckpoint(
  deps: RestoreJobDeps,
  scope: TenantScope,
  restore: RestoreOf,
  machine: WorkspaceMachine,
  generation: number,
  db: Db,
): Promise<{ id: string; root: string }> {
  if (restore.safetyCheckpointId) {
    const recorded = await getCheckpoint(scope, restore.safetyCheckpointId, db);
    if (recorded.rootTree) return { id: recorded.id, root: recorded.rootTree };
  }
  const row = await captureRowOf(
    deps.store,
    scope,
    {
      machine,
      workspaceId: restore.workspaceId,
      generation,
    },
    undefined,
    db,
  );
  const id = await recordSafetyCheckpoint(
    scope,
    restore.id,
    {
      ...row,
      workspaceId: restore.workspaceId,
      generation,
      sessionId: restore.sessionId,
    },
    db,
  );
  return { id, root: (await getCheckpoint(scope, id, db)).rootTree ?? row.rootTree };
}

/** After a revert that failed for good: the folder back as it was before it (best effort), and what to say. */
async function putBack(
  deps: RestoreJobDeps,
  scope: TenantScope,
  restore: RestoreOf,
  safety: { id: string; root: string } | null,
  log: Pick<Logger, "warn">,
): Promise<string> {
  if (!safety) return "";
  try {
    await deps.workspaces.withLease(
      scope,
      restore.workspaceId,
      { holder: restoreLeaseHolder(restore.id), reason: "checkpoint revert undone" },
      (workspace) =>
        restoreCheckpoint({
          machine: workspace.machine,
          store: deps.store,
          tenantId: scope.tenantId,
          root: safety.root,
        }),
    );
    return "; the workspace was put back as it was before the revert";
  } catch (error) {
    log.warn({ err: error, restoreId: restore.id }, "could not put a workspace back after a failed revert");
    return `; the state before the revert is checkpoint ${safety.id}`;
  }
}
