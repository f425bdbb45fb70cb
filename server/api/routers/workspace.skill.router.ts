import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { installSkillFromLibrary } from "@/server/modules/library/library.service";

const ZSkillTarget = ZTenantInput.extend({
  workspaceId: z.string().min(1).max(200),
  /** The agent's skill partition; omitted → the default partition. */
  agentId: z.string().min(1).max(200).nullish(),
});

/**
 * `workspace.skill.*`: list, remove and install from the library; uploads go through
 * POST /api/workspaces/:id/skills (multipart or an archive).
 */
export const workspaceSkillRouter = createTRPCRouter({
  list: tenantProcedureFor("workspace:read")
    .input(ZSkillTarget)
    .query(({ ctx, input }) =>
      ctx.berth.workspaces.content.listSkills(ctx.scope, input.workspaceId, input.agentId ?? null),
    ),

  /** The reference's `POST /workspace/skill/from-library`: a library skill into the agent's partition. */
  addFromLibrary: tenantProcedureFor("session:use")
    .input(ZSkillTarget.extend({ entryId: z.string().min(1).max(200) }))
    .mutation(({ ctx, input }) =>
      installSkillFromLibrary(
        ctx.scope,
        { entryId: input.entryId, workspaceId: input.workspaceId, agentId: input.agentId ?? null },
        ctx.berth.workspaces.content,
        ctx.berth.db,
      ),
    ),

  /**
   * By `dir` (the folder: stable and unambiguous, preferred) or by `name`; a name several skills share is a
   * CONFLICT whose details list the candidates.
   */
  remove: tenantProcedureFor("session:use")
    .input(
      ZSkillTarget.extend({
        name: z.string().min(1).max(200).optional(),
        dir: z.string().min(1).max(200).optional(),
      }).refine((input) => (input.name === undefined) !== (input.dir === undefined), {
        message: "give exactly one of name or dir",
        path: ["dir"],
      }),
    )
    .mutation(({ ctx, input }) =>
      ctx.berth.workspaces.content.removeSkill(
        ctx.scope,
        input.workspaceId,
        input.agentId ?? null,
        input.dir !== undefined ? { dir: input.dir } : { name: input.name! },
      ),
    ),
});
