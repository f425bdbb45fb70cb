import type { Db } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import type { Logger } from "@/server/logger";
import type { QuotaDeps } from "@/server/modules/quota/quota.service";
import { audited } from "@/server/modules/audit/audited";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { announceChange } from "@/server/modules/live/change-feed";
import { createSession, getSession, sessionNotFound } from "@/server/modules/session/session.data";
import { assignSessionWorkspaceId } from "@/server/modules/session/session.policy";
import { getWorkspaceOrNull, upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { AppError } from "@/server/shared/errors";
import { replaceUnstorableCharacters } from "@/server/shared/unsafe-strings";
import { captureCheckpoint } from "@/server/workspace/checkpoints/capture";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { diffTrees, type TreeEntry } from "@/server/workspace/checkpoints/tree";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import {
  beginRestore,
  type CheckpointRow,
  getCheckpoint,
  getRestore,
  insertCheckpoint,
  latestCheckpointTree,
  listSessionCheckpoints,
  recentTurnTrees,
} from "./checkpoint.data";
import { copyTranscriptUntil } from "./checkpoint-transcript.data";
import { captureRowOf, fileChanges } from "./checkpoint-capture";
import { unifiedDiffOf } from "./checkpoint-text";

export type CheckpointServiceDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  store: CheckpointStore;
  /** Hands a begun restore to the workers (`checkpoint.restore`). */
  enqueueRestore: (scope: TenantScope, restoreId: string) => Promise<void>;
  log: Pick<Logger, "warn">;
  /** The root's quota deps (a fork's new binding counts against `totalWorkspaces`), built on first use. */
  quota: () => Pick<QuotaDeps, "config">;
  /** Where changes are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
};

/** A diff lists at most this many files; the rest is counted. */
const MAX_DIFF_FILES = 2_000;

export function createCheckpointService(deps: CheckpointServiceDeps) {
  const { db } = deps;
  const { store } = deps;
  const readTree = (tenantId: string) => (hash: string) => store.readTree(tenantId, hash);

  /** A member acts only on their own sessions; another's answers NOT_FOUND, as another tenant's does. */
  async function sessionFor(scope: TenantScope, sessionId: string, forChange: boolean) {
    const session = await getSession(scope, sessionId, db);
    if (forChange && scope.role === "member" && session.userId !== scope.userId)
      throw sessionNotFound(sessionId);
    return session;
  }

  async function checkpointOf(scope: TenantScope, sessionId: string, checkpointId: string) {
    const checkpoint = await getCheckpoint(scope, checkpointId, db);
    if (checkpoint.sessionId !== sessionId || checkpoint.status !== "READY" || !checkpoint.rootTree) {
      throw new AppError(
        "BAD_REQUEST",
        `checkpoint ${checkpointId} is not a restorable checkpoint of session ${sessionId}`,
        {
          userMessage: "That checkpoint cannot be restored (it failed, or belongs to another session).",
        },
      );
    }
    return { ...checkpoint, rootTree: checkpoint.rootTree };
  }

  return {
    /**
     * Records the workdir at the end of a turn, or before one the sender marked risky (`before`: what
     * changed since the last turn outside of turns, an upload or a terminal, is kept too). Never fails
     * the turn: a checkpoint that cannot be taken is stored as FAILED with the reason, and the next one
     * starts from the last READY one.
     */
    async recordTurn(
      scope: TenantScope,
      input: {
        machine: WorkspaceMachine;
        workspaceId: string;
        generation: number;
        sessionId: string;
        turnId: string;
        before?: boolean;
        /** The MCP servers running for the turn's session when it is taken (names). */
        mcpRunning?: string[];
      },
    ): Promise<CheckpointRow | null> {
      const started = Date.now();
      const base = {
        workspaceId: input.workspaceId,
        generation: input.generation,
        sessionId: input.sessionId,
        mcpRunning: input.mcpRunning ?? [],
        // One checkpoint per turn names it: the one at its end.
        ...(input.before ? { turnId: null, kind: "BEFORE_TURN" as const } : { turnId: input.turnId }),
      };
      try {
        const row = await insertCheckpoint(
          scope,
          {
            ...base,
            ...(await captureRowOf(store, scope, input, undefined, db)),
          },
          db,
        );
        announceChange(scope.tenantId, { topic: "session", id: input.sessionId, userId: null });
        return row;
      } catch (error) {
        deps.log.warn({ err: error, workspaceId: input.workspaceId }, "could not record a turn checkpoint");
        const reason = error instanceof Error ? error.message : String(error);
        return insertCheckpoint(
          scope,
          {
            ...base,
            status: "FAILED",
            error: replaceUnstorableCharacters(reason.slice(0, 1_000)).text,
            durationMs: Date.now() - started,
          },
          db,
        ).catch(() => null);
      }
    },

    /**
     * What changed in the workspace's folder since the end of its last turn (`turnsBack` 0) or of the
     * turn `turnsBack` before it, with one file's unified diff when `path` is given: the agent's
     * `Changes` tool, run under the turn's lease. Reads only the files whose size or mtime changed.
     */
    async workingChanges(
      scope: TenantScope,
      input: { machine: WorkspaceMachine; workspaceId: string; generation: number },
      query: { turnsBack: number; path?: string | undefined; signal?: AbortSignal | undefined },
    ) {
      const latest = await latestCheckpointTree(scope, input.workspaceId, input.generation, db);
      const since =
        query.turnsBack === 0
          ? latest
          : ((await recentTurnTrees(scope, input.workspaceId, input.generation, query.turnsBack + 1, db))[
              query.turnsBack
            ] ?? null);
      const now = await captureCheckpoint({
        machine: input.machine,
        store,
        tenantId: scope.tenantId,
        previous: latest,
        ...(query.signal ? { signal: query.signal } : {}),
      });
      const changes = await fileChanges(store, scope.tenantId, since, now.root);
      if (query.path === undefined) return { changes, diff: null };
      const change = changes.find((candidate) => candidate.path === query.path);
      return { changes, diff: change ? await unifiedDiffOf(store, scope.tenantId, change) : null };
    },

    /** The session's checkpoints with their turns, oldest first. */
    async list(scope: TenantScope, sessionId: string) {
      await sessionFor(scope, sessionId, false);
      return (await listSessionCheckpoints(scope, sessionId, db)).map(({ checkpoint, turn }) => ({
        id: checkpoint.id,
        turnId: checkpoint.turnId,
        /**
         * TURN; BEFORE_TURN (before a turn sent as risky); BEFORE_REVERT (the folder just before a revert:
         * reverting to it undoes the revert).
         */
        kind: checkpoint.kind,
        status: checkpoint.status,
        files: checkpoint.files,
        totalBytes: Number(checkpoint.totalBytes),
        storedBytes: Number(checkpoint.storedBytes),
        added: checkpoint.added,
        changed: checkpoint.changed,
        removed: checkpoint.removed,
        durationMs: checkpoint.durationMs,
        error: checkpoint.error,
        createdAt: checkpoint.createdAt,
        turn: turn
          ? {
              status: turn.status,
              startedAt: turn.startedAt,
              reverted: turn.revertedAt !== null,
              message: turn.userMessage.slice(0, 200),
            }
          : null,
      }));
    },

    /** What the checkpoint's turn changed: files added, changed and removed since the checkpoint before it. */
    async diff(scope: TenantScope, sessionId: string, checkpointId: string) {
      await sessionFor(scope, sessionId, false);
      const checkpoint = await checkpointOf(scope, sessionId, checkpointId);
      const changes = await diffTrees(readTree(scope.tenantId), checkpoint.baseTree, checkpoint.rootTree);
      return {
        checkpointId,
        total: changes.length,
        truncated: changes.length > MAX_DIFF_FILES,
        files: changes.slice(0, MAX_DIFF_FILES).map((change) => ({
          path: change.path,
          kind: change.kind,
          type: (change.kind === "removed" ? change.before : change.after).type,
          sizeBefore: change.kind === "added" ? null : sizeOf(change.before),
          sizeAfter: change.kind === "removed" ? null : sizeOf(change.after),
        })),
      };
    },

    /** One file's change in the checkpoint's turn, as a unified text diff (none for binary or large files). */
    async fileDiff(scope: TenantScope, sessionId: string, checkpointId: string, path: string) {
      await sessionFor(scope, sessionId, false);
      const checkpoint = await checkpointOf(scope, sessionId, checkpointId);
      const change = (
        await diffTrees(readTree(scope.tenantId), checkpoint.baseTree, checkpoint.rootTree)
      ).find((candidate) => candidate.path === path);
      if (!change)
        throw new AppError("NOT_FOUND", `no change to ${path} in checkpoint ${checkpointId}`, {
          userMessage: "That file did not change in this turn.",
        });
      return unifiedDiffOf(store, scope.tenantId, change);
    },

    /**
     * Restores the session's workspace to the checkpoint (the workers write the files): refused while the
     * workspace is in use or another restore runs. Once it is done, the session's later turns are marked
     * reverted (kept in the transcript, left out of the model's context).
     */
    async revert(scope: TenantScope, input: { sessionId: string; checkpointId: string }) {
      return audited(
        deps.audit,
        scope,
        {
          action: "checkpoint.revert",
          targetType: "session",
          targetId: input.sessionId,
          details: { checkpointId: input.checkpointId },
        },
        async () => {
          const session = await sessionFor(scope, input.sessionId, true);
          const checkpoint = await checkpointOf(scope, session.id, input.checkpointId);
          if (checkpoint.workspaceId !== session.workspaceId) {
            throw new AppError("BAD_REQUEST", "The checkpoint belongs to another workspace of this session");
          }
          const { restoreId } = await beginRestore(
            scope,
            {
              kind: "REVERT",
              checkpointId: checkpoint.id,
              workspaceId: session.workspaceId,
              sessionId: session.id,
            },
            undefined,
            db,
          );
          await deps.enqueueRestore(scope, restoreId);
          return { restoreId };
        },
        undefined,
        (result) => ({ details: { checkpointId: input.checkpointId, restoreId: result.restoreId } }),
      );
    },

    /**
     * A new session from the checkpoint: the transcript up to its turn, and a new workspace of its own
     * (whatever the agent's isolation policy) that the workers fill with the checkpoint's files before
     * its first use.
     */
    async fork(
      scope: TenantScope,
      input: { sessionId: string; checkpointId: string; name?: string | undefined },
    ) {
      return audited(
        deps.audit,
        scope,
        {
          action: "checkpoint.fork",
          targetType: "session",
          targetId: input.sessionId,
          details: { checkpointId: input.checkpointId },
        },
        async () => {
          const source = await sessionFor(scope, input.sessionId, true);
          const checkpoint = await checkpointOf(scope, source.id, input.checkpointId);
          const sourceWorkspace = await getWorkspaceOrNull(scope, checkpoint.workspaceId, db);
          const workspaceId = assignSessionWorkspaceId("PER_SESSION", scope, source.agentId);
          const { restoreId } = await beginRestore(
            scope,
            { kind: "FORK", checkpointId: checkpoint.id, workspaceId, sessionId: "" },
            async (tx) => {
              await upsertWorkspaceBinding(
                scope,
                {
                  id: workspaceId,
                  backendKind: sourceWorkspace?.backendKind ?? "local",
                  isolationPolicy: "PER_SESSION",
                  agentId: source.agentId,
                  userId: scope.userId ?? source.userId,
                },
                deps.quota(),
                tx,
              );
              const fork = await createSession(
                scope,
                {
                  agentId: source.agentId,
                  workspaceId,
                  name: input.name ?? `${source.name || "Session"} (fork)`.slice(0, 200),
                  env: source.env,
                },
                tx,
              );
              await copyTranscriptUntil(
                scope,
                { from: source.id, to: fork.id, turnId: checkpoint.turnId },
                tx,
              );
              return { sessionId: fork.id };
            },
            db,
          );
          const forkId = (await getRestore(scope, restoreId, db)).sessionId;
          await deps.enqueueRestore(scope, restoreId);
          announceChange(scope.tenantId, { topic: "session", id: forkId, userId: scope.userId });
          return { sessionId: forkId, workspaceId, restoreId };
        },
        undefined,
        (result) => ({
          details: {
            checkpointId: input.checkpointId,
            forkSessionId: result.sessionId,
            restoreId: result.restoreId,
          },
        }),
      );
    },

    /** A revert's or fork's progress. */
    async restoreStatus(scope: TenantScope, restoreId: string) {
      const restore = await getRestore(scope, restoreId, db);
      if (scope.role === "member") await sessionFor(scope, restore.sessionId, true);
      return {
        ...restore,
        writtenBytes: Number(restore.writtenBytes),
        toWriteBytes: Number(restore.toWriteBytes),
      };
    },
  };
}

function sizeOf(entry: TreeEntry): number | null {
  return entry.type === "file" ? entry.size : null;
}

export type CheckpointService = ReturnType<typeof createCheckpointService>;
