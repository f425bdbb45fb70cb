import { randomUUID } from "node:crypto";
import type { z } from "zod";
import type { TenantScope } from "@/server/auth/scope";
import { getAgentForTurn } from "@/server/modules/agent/agent.data";
import { announceChange } from "@/server/modules/live/change-feed";
import type { TurnAdmission } from "@/server/modules/quota/quota.service";
import { getSessionOrWhyGone } from "@/server/modules/session/session-gone";
import type { SessionDTO } from "@/server/modules/session/session.types";
import { parseInput } from "@/server/shared/parse-input";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { EventChannel } from "@/server/agent/event-channel";
import type { ChatContext } from "./chat-context";
import { replayTurn } from "./chat-following";
import { ZChatSendRequest } from "./chat.schema";
import { announceTurnStarted } from "./turn-attach";
import { runAndFinish, type ClaimedTurn } from "./turn-run";

/** A `keepalive` event on a quiet stream every this often (server/agent/agent.schema.ts). */
const KEEPALIVE_MS = 15_000;

/**
 * `chat.send`: starts one turn and returns its event stream. Rejects at once (before any event) with
 * NOT_FOUND for a session of another tenant and CONFLICT while the session has a running turn in any
 * process. Leaving the iteration early, or `options.signal` aborting (the HTTP request's: a closed tab, a
 * reload, a dropped connection), only stops this stream: the turn runs to its end and is persisted, and
 * `attach` / `follow` show it again. Only `cancel` stops a turn. The final `done` event is sent only after
 * the turn's messages are stored, so `history` right after `done` includes them.
 *
 * Reads the session and the agent once each; what the turn needs of them later is passed down.
 */
export async function sendTurn(
  ctx: ChatContext,
  scope: TenantScope,
  raw: z.input<typeof ZChatSendRequest>,
  options: { signal?: AbortSignal } = {},
): Promise<AsyncIterable<TChatTurnEvent>> {
  const { db } = ctx;
  const input = parseInput(ZChatSendRequest, raw);
  // A session deleted with its agent says so (details.reason "agent_deleted"), not a bare NOT_FOUND.
  const session = await getSessionOrWhyGone(scope, input.sessionId, db);
  // The agent and its sealed key in one read (decrypted when the turn runs, see getAgentForTurn).
  const agent = await getAgentForTurn(scope, session.agentId, ctx.secretKey, db);
  options.signal?.throwIfAborted();
  const admission = await admit(ctx, scope);
  const claim = await claimSession(ctx, scope, session, input, admission);
  // The same send again (a client that lost its connection): report that turn, never run it twice.
  if (claim.kind === "existing") {
    await admission?.release();
    return replayTurn(ctx.attach, ctx.log, scope, claim.turn, options.signal);
  }
  return startTurn(
    ctx,
    {
      scope,
      session,
      agent,
      message: input.message,
      checkpointFirst: input.checkpointFirst ?? false,
      turn: claim.turn,
      admission,
      requestedAt: Date.now(),
    },
    options.signal,
  );
}

/**
 * Before the session is claimed or any workspace touched: the budget's hard stop and one of the tenant's
 * concurrent-turn slots (QUOTA_EXCEEDED names the limit), held until the turn ends.
 */
function admit(ctx: ChatContext, scope: TenantScope): Promise<TurnAdmission | undefined> {
  return ctx.quota ? ctx.quota.admitTurn(scope.tenantId, randomUUID()) : Promise.resolve(undefined);
}

/** The session's one running turn for this send (turn-registry.ts); a refused claim gives the slot back. */
async function claimSession(
  ctx: ChatContext,
  scope: TenantScope,
  session: SessionDTO,
  input: z.output<typeof ZChatSendRequest>,
  admission: TurnAdmission | undefined,
) {
  return ctx.registry
    .start(scope, {
      sessionId: session.id,
      idempotencyKey: input.idempotencyKey ?? null,
      userMessage: input.message,
    })
    .catch(async (error: unknown) => {
      await admission?.release();
      throw error;
    });
}

/**
 * The claimed turn's stream: its events numbered from 1 into the turn's log (re-attaching tabs) and to this
 * send's listener, keepalives while it is quiet, the slot renewed while it runs; the turn itself runs in the
 * background (turn-run.ts) and ends the stream when it has let go of its claim.
 */
function startTurn(
  ctx: ChatContext,
  claimed: ClaimedTurn,
  signal: AbortSignal | undefined,
): AsyncIterable<TChatTurnEvent> {
  const { scope, session, turn, admission } = claimed;
  const renewal = admission
    ? setInterval(() => void admission.renew().catch(() => undefined), ctx.quota!.renewEveryMs)
    : null;
  renewal?.unref();
  const channel = new EventChannel<TChatTurnEvent>();
  // The listener went away: stop buffering for it (the turn goes on, its log keeps every event).
  const stopStreaming = () => channel.close();
  signal?.addEventListener("abort", stopStreaming, { once: true });
  if (signal?.aborted) stopStreaming();
  const keepalive = keepAlive(channel);
  // Every event but keepalives, numbered from 1, into the turn's log (re-attaching tabs), then the stream.
  let seq = 0;
  const publish = (event: TChatTurnEvent) => {
    ctx.eventLog.append(turn.turnId, ++seq, event);
    channel.push(event);
  };
  announceTurnStarted(session.id);
  announceChange(scope.tenantId, { topic: "session", id: session.id, userId: session.userId });
  void runAndFinish(ctx, claimed, {
    publish,
    stop: () => {
      clearInterval(keepalive);
      if (renewal) clearInterval(renewal);
      signal?.removeEventListener("abort", stopStreaming);
    },
    close: () => channel.close(),
  });
  return channel;
}

function keepAlive(channel: EventChannel<TChatTurnEvent>): NodeJS.Timeout {
  const timer = setInterval(() => {
    if (channel.idleMs() >= KEEPALIVE_MS) channel.push({ type: "keepalive" });
  }, KEEPALIVE_MS / 3);
  timer.unref();
  return timer;
}
