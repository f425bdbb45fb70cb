import { TRPCError } from "@trpc/server";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { ZChatHistoryRequest, ZChatSendRequest } from "@/server/modules/chat/chat.service";
import { getAgentServices } from "@/server/composition/services";

const chat = () => getAgentServices().chat;

/**
 * `chat.*`. `send` is a MUTATION (POST only: a cross-site link or a GET can never start a turn) whose result
 * is the turn's event stream (text deltas, tool calls/results, offloads, errors, then `done`), streamed as
 * JSON lines: call it through `httpBatchStreamLink` (createBerthClient and the dashboard route it there).
 * One turn per request: aborting the request (the client's `signal`, a closed tab) cancels the turn, and
 * `chat.cancel` cancels it from anywhere.
 */
export const chatRouter = createTRPCRouter({
  send: tenantProcedureFor("session:use")
    .input(ZTenantInput.extend(ZChatSendRequest.shape))
    .mutation(({ ctx, input, signal }) => {
      if (ctx.streamingResponse === false) {
        throw new TRPCError({
          code: "BAD_REQUEST",
          message:
            "chat.send streams its events: call it through httpBatchStreamLink (trpc-accept: application/jsonl)",
        });
      }
      return chat().send(
        ctx.scope,
        {
          sessionId: input.sessionId,
          message: input.message,
          ...(input.idempotencyKey ? { idempotencyKey: input.idempotencyKey } : {}),
        },
        signal ? { signal } : {},
      );
    }),

  cancel: tenantProcedureFor("session:use")
    .input(ZTenantInput.extend({ sessionId: ZChatSendRequest.shape.sessionId }))
    .mutation(({ ctx, input }) => chat().cancel(ctx.scope, input.sessionId)),

  history: tenantProcedureFor("session:read")
    .input(ZTenantInput.extend(ZChatHistoryRequest.shape))
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) => chat().history(ctx.scope, input)),
});
