import { TRPCError } from "@trpc/server";
import { authedProcedure, createTRPCRouter } from "@/server/api/trpc";
import { changePassword, ZChangePasswordInput } from "@/server/modules/account/account.service";

/** `account.*`: the signed-in user's own account (the dashboard's profile page). */
export const accountRouter = createTRPCRouter({
  /** Ends every other session of the user; the caller's session continues under a new cookie. */
  changePassword: authedProcedure.input(ZChangePasswordInput).mutation(async ({ ctx, input }) => {
    if (ctx.principal.kind !== "user") {
      throw new TRPCError({
        code: "BAD_REQUEST",
        message: "API keys have no password; sign in to change it",
      });
    }
    const { setCookies } = await changePassword(
      ctx.runtime.auth,
      { userId: ctx.principal.userId, email: ctx.principal.email, headers: ctx.headers },
      input,
      ctx.berth.audit,
      ctx.berth.db,
    );
    for (const cookie of setCookies) ctx.resHeaders?.append("set-cookie", cookie);
    return { changed: true as const, otherSessionsEnded: true as const };
  }),
});
