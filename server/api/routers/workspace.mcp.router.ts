import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { installMcpFromLibrary } from "@/server/modules/library/library.service";

// An MCP scope is (agent, session); "" is the shared legacy scope (agentscope-spec.md §2.1).
const ZMcpTarget = ZTenantInput.extend({
  workspaceId: z.string().min(1).max(200),
  agentId: z.string().max(200).default(""),
  sessionId: z.string().max(200).default(""),
});

/** `workspace.mcp.*`: the MCP declarations of one scope of a workspace. Changes need members and up. */
export const workspaceMcpRouter = createTRPCRouter({
  list: tenantProcedureFor("workspace:read")
    .input(ZMcpTarget)
    .query(({ ctx, input }) =>
      ctx.berth.workspaces.content.listMcps(ctx.scope, input.workspaceId, {
        agentId: input.agentId,
        sessionId: input.sessionId,
      }),
    ),

  add: tenantProcedureFor("session:use")
    // The declaration is validated by the engine's schema (the `.mcp` v2 shape) inside the service.
    .input(ZMcpTarget.extend({ declaration: z.record(z.string(), z.unknown()) }))
    .mutation(({ ctx, input }) =>
      ctx.berth.workspaces.content.addMcp(
        ctx.scope,
        input.workspaceId,
        { agentId: input.agentId, sessionId: input.sessionId },
        input.declaration,
      ),
    ),

  /** The reference's `POST /workspace/mcp/from-library`: a library entry's declaration into this scope. */
  addFromLibrary: tenantProcedureFor("session:use")
    .input(ZMcpTarget.extend({ entryId: z.string().min(1).max(200) }))
    .mutation(({ ctx, input }) =>
      installMcpFromLibrary(
        ctx.scope,
        {
          entryId: input.entryId,
          workspaceId: input.workspaceId,
          agentId: input.agentId,
          sessionId: input.sessionId,
        },
        ctx.berth.workspaces.content,
        ctx.berth.db,
      ),
    ),

  remove: tenantProcedureFor("session:use")
    .input(ZMcpTarget.extend({ name: z.string().min(1).max(200) }))
    .mutation(({ ctx, input }) =>
      ctx.berth.workspaces.content.removeMcp(
        ctx.scope,
        input.workspaceId,
        { agentId: input.agentId, sessionId: input.sessionId },
        input.name,
      ),
    ),
});
