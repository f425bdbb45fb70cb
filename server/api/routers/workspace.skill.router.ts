import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { getWorkspaceServices } from "@/server/composition/services";

const ZSkillTarget = ZTenantInput.extend({
  workspaceId: z.string().min(1).max(200),
  /** The agent's skill partition; omitted → the default partition. */
  agentId: z.string().min(1).max(200).nullish(),
});

/** `workspace.skill.*`: list and remove; uploads go through POST /api/workspaces/:id/skills (multipart). */
export const workspaceSkillRouter = createTRPCRouter({
  list: tenantProcedureFor("workspace:read")
    .input(ZSkillTarget)
    .query(({ ctx, input }) =>
      getWorkspaceServices().content.listSkills(ctx.scope, input.workspaceId, input.agentId ?? null),
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
      getWorkspaceServices().content.removeSkill(
        ctx.scope,
        input.workspaceId,
        input.agentId ?? null,
        input.dir !== undefined ? { dir: input.dir } : { name: input.name! },
      ),
    ),
});
