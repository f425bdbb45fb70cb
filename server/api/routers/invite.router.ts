import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import {
  createInvite,
  inviteLinkSecret,
  listTenantInvites,
  revokeInvite,
} from "@/server/modules/member/invite.service";
import { ZInviteCreateRequest, ZInviteDTO } from "@/server/modules/member/invite.types";

/**
 * `invite.*`: admins make email-less invitation links (`/invite/<token>`), see them and revoke pending ones.
 * Accepting is not here: the person has no account yet, so it is the public route
 * `POST /api/invitations/accept` (every tRPC mutation stays tenant-scoped).
 */
export const inviteRouter = createTRPCRouter({
  /** The token is in this answer only: the list never shows it. */
  create: tenantProcedureFor("member:manage")
    .input(ZTenantInput.extend(ZInviteCreateRequest.shape))
    .output(z.object({ invite: ZInviteDTO, token: z.string() }))
    .mutation(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) =>
      createInvite(ctx.scope, input, inviteLinkSecret(ctx.berth.config), ctx.berth.db),
    ),

  list: tenantProcedureFor("member:manage")
    .input(ZTenantInput)
    .output(z.array(ZInviteDTO))
    .query(({ ctx }) => listTenantInvites(ctx.scope, ctx.berth.db)),

  revoke: tenantProcedureFor("member:manage")
    .input(ZTenantInput.extend({ inviteId: z.string().min(1).max(200) }))
    .output(z.object({ revoked: z.literal(true) }))
    .mutation(async ({ ctx, input }) => {
      await revokeInvite(ctx.scope, input.inviteId, ctx.berth.db);
      return { revoked: true as const };
    }),
});
