import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import {
  addLibraryEntry,
  changeLibraryEntry,
  equipAgentFromLibrary,
  getLibraryEntryDetail,
  listLibrary,
  removeLibraryEntry,
} from "@/server/modules/library/library.service";
import {
  ZLibraryCreateRequest,
  ZLibraryEntryDetail,
  ZLibraryEntryPage,
  ZLibraryEntryView,
  ZLibraryListRequest,
  ZLibraryUpdateRequest,
} from "@/server/modules/library/library.types";

const ZEntryTarget = ZTenantInput.extend({ entryId: z.string().min(1).max(200) });

/**
 * `library.*`: the tenant's vetted MCP declarations and skills. Members and viewers read (each entry with the
 * agents whose defaults name it); admins add, change, delete and equip agents from it (`library:manage`,
 * `agent:manage`). Skill uploads go through POST /api/library/skills; installs into a workspace through
 * `workspace.mcp.addFromLibrary` and `workspace.skill.addFromLibrary`.
 */
export const libraryRouter = createTRPCRouter({
  list: tenantProcedureFor("library:read")
    .input(ZTenantInput.extend(ZLibraryListRequest.shape))
    .output(ZLibraryEntryPage)
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...request } }) =>
      listLibrary(ctx.scope, request, ctx.berth.db),
    ),

  get: tenantProcedureFor("library:read")
    .input(ZEntryTarget)
    .output(ZLibraryEntryDetail)
    .query(({ ctx, input }) => getLibraryEntryDetail(ctx.scope, input.entryId, ctx.berth.db)),

  create: tenantProcedureFor("library:manage")
    .input(z.intersection(ZTenantInput, ZLibraryCreateRequest))
    .output(ZLibraryEntryView)
    .mutation(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...request } }) =>
      addLibraryEntry(ctx.scope, request, ctx.berth.audit, ctx.berth.db),
    ),

  update: tenantProcedureFor("library:manage")
    .input(ZEntryTarget.extend({ patch: ZLibraryUpdateRequest }))
    .output(ZLibraryEntryView)
    .mutation(({ ctx, input }) =>
      changeLibraryEntry(ctx.scope, input.entryId, input.patch, ctx.berth.audit, ctx.berth.db),
    ),

  delete: tenantProcedureFor("library:manage")
    .input(ZEntryTarget)
    .output(z.object({ deleted: z.literal(true) }))
    .mutation(({ ctx, input }) =>
      removeLibraryEntry(ctx.scope, input.entryId, ctx.berth.audit, ctx.berth.db),
    ),

  /** Adds the entry to the agent's defaults (or replaces its default of the same name). */
  equip: tenantProcedureFor("agent:manage")
    .input(ZEntryTarget.extend({ agentId: z.string().min(1).max(200) }))
    .output(
      z.object({
        agentId: z.string(),
        name: z.string(),
        outcome: z.enum(["added", "replaced", "unchanged"]),
      }),
    )
    .mutation(({ ctx, input }) =>
      equipAgentFromLibrary(
        ctx.scope,
        { entryId: input.entryId, agentId: input.agentId },
        ctx.berth.audit,
        ctx.berth.db,
      ),
    ),
});
