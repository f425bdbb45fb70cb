import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { ZChatHistoryRequest, ZChatSendRequest } from "@/server/modules/chat/chat.service";
import { getAgentServices } from "@/server/modules/chat/chat.composition";

const chat = () => getAgentServices().chat;

/** `chat.*`: a turn streams as a subscription (text deltas, tool calls/results, offloads, errors, done). */
export const chatRouter = createTRPCRouter({
  send: tenantProcedureFor("session:use")
    .input(ZTenantInput.extend(ZChatSendRequest.shape))
    .subscription(({ ctx, input }) =>
      chat().send(ctx.scope, { sessionId: input.sessionId, message: input.message }),
    ),

  cancel: tenantProcedureFor("session:use")
    .input(ZTenantInput.extend({ sessionId: ZChatSendRequest.shape.sessionId }))
    .mutation(({ ctx, input }) => chat().cancel(ctx.scope, input.sessionId)),

  history: tenantProcedureFor("session:read")
    .input(ZTenantInput.extend(ZChatHistoryRequest.shape))
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) => chat().history(ctx.scope, input)),
});
