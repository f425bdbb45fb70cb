import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import type { Berth } from "@/server/composition/berth";

const ZId = z.string().min(1).max(200);
const ZSessionTarget = ZTenantInput.extend({ sessionId: ZId });
const ZCheckpointTarget = ZSessionTarget.extend({ checkpointId: ZId });
const checkpoints = (ctx: { berth: Berth }) => ctx.berth.agents.checkpoints;

/**
 * `checkpoint.*`: every turn leaves a checkpoint of its workspace's files. Viewers read them and their
 * diffs; members revert their sessions to one, or fork a new session from one (`session:use`).
 */
export const checkpointRouter = createTRPCRouter({
  /** The session's checkpoints, oldest first, each with its turn (status, first words, reverted). */
  list: tenantProcedureFor("session:read")
    .input(ZSessionTarget)
    .query(({ ctx, input }) => checkpoints(ctx).list(ctx.scope, input.sessionId)),

  /** The files the checkpoint's turn added, changed and removed. */
  diff: tenantProcedureFor("session:read")
    .input(ZCheckpointTarget)
    .query(({ ctx, input }) => checkpoints(ctx).diff(ctx.scope, input.sessionId, input.checkpointId)),

  /** One file's change as a unified text diff (`binary: true` and no diff for binary or large files). */
  fileDiff: tenantProcedureFor("session:read")
    .input(ZCheckpointTarget.extend({ path: z.string().min(1).max(4_096) }))
    .query(({ ctx, input }) =>
      checkpoints(ctx).fileDiff(ctx.scope, input.sessionId, input.checkpointId, input.path),
    ),

  /** → `{ restoreId }`: the workers bring the workspace back to the checkpoint; later turns are marked reverted. */
  revert: tenantProcedureFor("session:use")
    .input(ZCheckpointTarget)
    .mutation(({ ctx, input }) =>
      checkpoints(ctx).revert(ctx.scope, { sessionId: input.sessionId, checkpointId: input.checkpointId }),
    ),

  /** → `{ sessionId, workspaceId, restoreId }`: a new session from the checkpoint, in a workspace of its own. */
  fork: tenantProcedureFor("session:use")
    .input(ZCheckpointTarget.extend({ name: z.string().trim().min(1).max(200).optional() }))
    .mutation(({ ctx, input }) =>
      checkpoints(ctx).fork(ctx.scope, {
        sessionId: input.sessionId,
        checkpointId: input.checkpointId,
        name: input.name,
      }),
    ),

  /** A revert's or fork's progress: RUNNING, DONE (files written and deleted) or FAILED (why). */
  restore: tenantProcedureFor("session:read")
    .input(ZTenantInput.extend({ restoreId: ZId }))
    .query(({ ctx, input }) => checkpoints(ctx).restoreStatus(ctx.scope, input.restoreId)),
});
