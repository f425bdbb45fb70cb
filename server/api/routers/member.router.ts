import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { ZTenantRole } from "@/server/auth/roles";
import { changeMemberRole, removeMember, listTenantMembers } from "@/server/modules/member/member.service";
import { ZMemberDTO } from "@/server/modules/member/member.types";

const ZMemberTarget = ZTenantInput.extend({ userId: z.string().min(1).max(200) });

export const memberRouter = createTRPCRouter({
  list: tenantProcedureFor("member:read")
    .input(ZTenantInput)
    .output(z.array(ZMemberDTO))
    .query(({ ctx }) => listTenantMembers(ctx.berth.db, ctx.scope)),

  changeRole: tenantProcedureFor("member:manage")
    .input(ZMemberTarget.extend({ role: ZTenantRole }))
    .output(ZMemberDTO)
    .mutation(({ ctx, input }) => changeMemberRole(ctx.berth.db, ctx.scope, input.userId, input.role)),

  remove: tenantProcedureFor("member:manage")
    .input(ZMemberTarget)
    .output(z.object({ removed: z.literal(true) }))
    .mutation(async ({ ctx, input }) => {
      await removeMember(ctx.berth.db, ctx.scope, input.userId);
      return { removed: true as const };
    }),
});
