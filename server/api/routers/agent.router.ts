import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import {
  ZAgentCreateRequest,
  ZAgentUpdateRequest,
  ZAgentView,
  ZAgentViewPage,
} from "@/server/modules/agent/agent.schema";
import { ZModelCheckResult } from "@/server/modules/chat/model-check";
import { ZPageInput } from "@/server/shared/page";
import type { Berth } from "@/server/composition/berth";

const ZAgentTarget = ZTenantInput.extend({ agentId: z.string().min(1).max(200) });
const agents = (ctx: { berth: Berth }) => ctx.berth.agents.agent;

/**
 * `agent.*`: reads for viewers, changes for admins (`agent:manage`). Keys go in, never come out: the output
 * schemas (ZAgentView) strip any field they do not name, so a key or its ciphertext cannot leak by accident.
 */
export const agentRouter = createTRPCRouter({
  create: tenantProcedureFor("agent:manage")
    .input(ZTenantInput.extend(ZAgentCreateRequest.shape))
    .output(ZAgentView)
    .mutation(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) =>
      agents(ctx).create(ctx.scope, input),
    ),

  list: tenantProcedureFor("agent:read")
    .input(ZTenantInput.extend(ZPageInput.shape))
    .output(ZAgentViewPage)
    .query(({ ctx, input }) => agents(ctx).list(ctx.scope, input)),

  get: tenantProcedureFor("agent:read")
    .input(ZAgentTarget)
    .output(ZAgentView)
    .query(({ ctx, input }) => agents(ctx).get(ctx.scope, input.agentId)),

  update: tenantProcedureFor("agent:manage")
    .input(ZAgentTarget.extend({ patch: ZAgentUpdateRequest }))
    .output(ZAgentView)
    .mutation(({ ctx, input }) => agents(ctx).update(ctx.scope, input.agentId, input.patch)),

  /** One tiny completion with the stored endpoint, model and key: `{ ok }`, or why not in words. */
  testConnection: tenantProcedureFor("agent:manage")
    .input(ZAgentTarget)
    .output(ZModelCheckResult)
    .mutation(({ ctx, input }) => ctx.berth.agents.checkModel(ctx.scope, input.agentId)),

  /** Sessions go with it; `agent.purge` cleans its skills and MCP scopes out of every workspace it used. */
  delete: tenantProcedureFor("agent:manage")
    .input(ZAgentTarget)
    .mutation(({ ctx, input }) => agents(ctx).delete(ctx.scope, input.agentId)),
});
