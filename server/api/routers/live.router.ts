import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { resolveTenantScope } from "@/server/auth/resolve";
import { CHANGE_TOPICS, ZChangeTopic } from "@/server/modules/live/change-feed";
import { tenantChangeStream } from "@/server/modules/live/change-stream";

/**
 * `live.*`: the dashboard's live updates. One `live.changes` subscription per page (SSE through
 * httpSubscriptionLink, on whichever replica the browser reached): a `ready` event once subscribed, then
 * what changed in the tenant (`{ topic, id }`), only what the caller may list. The page refetches its own
 * queries on each; see ARCHITECTURE.md "Live pages".
 */
export const liveRouter = createTRPCRouter({
  changes: tenantProcedureFor("tenant:read")
    .input(
      ZTenantInput.extend({
        /** Only these topics (all when absent). */
        topics: z.array(ZChangeTopic).min(1).max(CHANGE_TOPICS.length).optional(),
      }),
    )
    .subscription(async function* ({ ctx, input, signal }) {
      let scope = ctx.scope;
      yield* tenantChangeStream(ctx.berth.changeFeed, {
        db: ctx.berth.db,
        tenantId: scope.tenantId,
        topics: input.topics,
        signal,
        // A membership change of the caller counts at once: a removed member's stream ends (FORBIDDEN),
        // a demoted one hears only what the new role may list.
        currentScope: async (change) => {
          if (change.topic === "member" && (!change.userId || change.userId === scope.userId)) {
            scope = await resolveTenantScope(ctx.principal, scope.tenantId, ctx.berth.db);
          }
          return scope;
        },
      });
    }),
});
