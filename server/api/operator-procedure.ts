import { authedProcedure } from "@/server/api/trpc";
import { operatorActorForUser } from "@/server/modules/operator/operator-actor";
import { AppError } from "@/server/shared/errors";

/**
 * Procedures above tenants (`operator.*`): a signed-in user who is an operator, re-checked against the
 * database on every call. API keys belong to one tenant, so they never pass; tenant admins and owners get
 * FORBIDDEN (`details.reason: "not_operator"`) like anyone else who is not an operator.
 */
export const operatorProcedure = authedProcedure.use(async ({ ctx, next }) => {
  if (ctx.principal.kind !== "user") {
    throw new AppError("FORBIDDEN", "operator procedures need a signed-in operator, not an api key", {
      userMessage: "Operators sign in: API keys belong to a tenant and cannot act on tenants.",
      details: { reason: "not_operator" },
    });
  }
  const operator = await operatorActorForUser(ctx.principal.userId, ctx.berth.db);
  return next({ ctx: { operator } });
});
