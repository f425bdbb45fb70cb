import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import {
  ZSessionCreateRequest,
  ZSessionListRequest,
  ZSessionUpdateRequest,
} from "@/server/modules/session/session.schema";
import type { Berth } from "@/server/composition/berth";

const ZSessionTarget = ZTenantInput.extend({ sessionId: z.string().min(1).max(200) });
const sessions = (ctx: { berth: Berth }) => ctx.berth.agents.session;

/** `session.*`: members create and delete sessions (`session:use`); viewers read. */
export const sessionRouter = createTRPCRouter({
  /**
   * → `{ sessionId, workspaceId }`; the workspace id is fixed here for the session's life, nothing provisioned.
   * With `idempotencyKey`, the same key from the same caller (24 hours) returns the first session.
   */
  create: tenantProcedureFor("session:use")
    .input(ZTenantInput.extend(ZSessionCreateRequest.shape))
    .mutation(async ({ ctx, input }) => {
      const { sessionId, workspaceId } = await sessions(ctx).create(ctx.scope, {
        agentId: input.agentId,
        ...(input.workspaceId !== undefined ? { workspaceId: input.workspaceId } : {}),
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.env !== undefined ? { env: input.env } : {}),
        ...(input.idempotencyKey !== undefined ? { idempotencyKey: input.idempotencyKey } : {}),
      });
      return { sessionId, workspaceId };
    }),

  list: tenantProcedureFor("session:read")
    .input(ZTenantInput.extend(ZSessionListRequest.shape))
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) =>
      sessions(ctx).list(ctx.scope, input),
    ),

  get: tenantProcedureFor("session:read")
    .input(ZSessionTarget)
    .query(({ ctx, input }) => sessions(ctx).get(ctx.scope, input.sessionId)),

  /** Renames the session or replaces its environment variables (over its agent's). */
  update: tenantProcedureFor("session:use")
    .input(ZSessionTarget.extend({ patch: ZSessionUpdateRequest }))
    .mutation(({ ctx, input }) => sessions(ctx).update(ctx.scope, input.sessionId, input.patch)),

  /** Also deletes the team-worker sessions it led; their MCP scopes and offload files are purged by a job. */
  delete: tenantProcedureFor("session:use")
    .input(ZSessionTarget)
    .mutation(({ ctx, input }) => sessions(ctx).delete(ctx.scope, input.sessionId)),
});
