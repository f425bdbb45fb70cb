import { TRPCError } from "@trpc/server";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { ZChatHistoryRequest, ZChatSendRequest } from "@/server/modules/chat/chat.schema";
import { ZChatAttachRequest } from "@/server/modules/chat/turn-attach";
import type { Berth } from "@/server/composition/berth";

const chat = (ctx: { berth: Berth }) => ctx.berth.agents.chat;

/**
 * `chat.*`. `send` is a MUTATION (POST only: a cross-site link or a GET can never start a turn) whose result
 * is the turn's event stream (text deltas, tool calls/results, offloads, errors, then `done`), streamed as
 * JSON lines: call it through `httpBatchStreamLink` (createBerthClient and the dashboard route it there).
 * A turn runs to its end on the server whatever its request does: aborting it (the client's `signal`, a
 * closed tab, a reload) only stops that stream. `chat.attach` streams a running (or recent) turn again from
 * a sequence number, `chat.follow` (SSE) every turn of a session as it runs, and only `chat.cancel` stops a
 * turn, from anywhere.
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
      return chat(ctx).send(
        ctx.scope,
        {
          sessionId: input.sessionId,
          message: input.message,
          ...(input.idempotencyKey ? { idempotencyKey: input.idempotencyKey } : {}),
          ...(input.checkpointFirst ? { checkpointFirst: true } : {}),
        },
        signal ? { signal } : {},
      );
    }),

  attach: tenantProcedureFor("session:read")
    .input(ZTenantInput.extend(ZChatAttachRequest.shape))
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input }, signal }) => {
      if (ctx.streamingResponse === false) {
        throw new TRPCError({
          code: "BAD_REQUEST",
          message:
            "chat.attach streams its events: call it through httpBatchStreamLink (trpc-accept: application/jsonl)",
        });
      }
      return chat(ctx).attach(ctx.scope, input, signal);
    }),

  follow: tenantProcedureFor("session:read")
    .input(ZTenantInput.extend({ sessionId: ZChatSendRequest.shape.sessionId }))
    // Not a generator: the session is checked when the subscription is made (a foreign or unknown session
    // is refused at once, NOT_FOUND), not on its first pull.
    .subscription(({ ctx, input, signal }) => chat(ctx).follow(ctx.scope, input.sessionId, signal)),

  turns: tenantProcedureFor("session:read")
    .input(ZTenantInput.extend({ sessionId: ZChatSendRequest.shape.sessionId }))
    .query(({ ctx, input }) => chat(ctx).turns(ctx.scope, input.sessionId)),

  cancel: tenantProcedureFor("session:use")
    .input(ZTenantInput.extend({ sessionId: ZChatSendRequest.shape.sessionId }))
    .mutation(({ ctx, input }) => chat(ctx).cancel(ctx.scope, input.sessionId)),

  history: tenantProcedureFor("session:read")
    .input(ZTenantInput.extend(ZChatHistoryRequest.shape))
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) =>
      chat(ctx).history(ctx.scope, input),
    ),
});
