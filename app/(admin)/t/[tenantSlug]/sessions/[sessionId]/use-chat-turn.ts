"use client";

import { TRPCClientError } from "@trpc/client";
import { useSubscription } from "@trpc/tanstack-react-query";
import { useCallback, useRef, useState } from "react";
import { useTRPC, useTRPCClient } from "@/app/_trpc/client";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { isTransportFailure } from "@/server/client/chat-run";
import { applyTurnEvent, type LiveTurn, startingTurn, type TurnError } from "./live-turn";

export type { LiveTurn, TurnError } from "./live-turn";

/** A send the server refused before any turn started: the message was not sent (the draft stays). */
export type SendRefusal = TurnError;

/**
 * The chat transport, in one place. `send` starts a turn through `chat.send` (a POST streaming its events)
 * and folds them into `turn`; `cancel` asks the server to stop it (`chat.cancel`: the only way a turn
 * stops early; a reload or a closed tab never cancels). `chat.follow` (SSE) shows every other turn of the
 * session as it runs: one running when the page loads (replayed from its start), one sent from another tab.
 */
export function useChatTurn({
  tenantSlug,
  sessionId,
  onSettled,
  onStarted,
  onAccepted,
  onRefused,
}: {
  tenantSlug: string;
  sessionId: string;
  /** After `done` (the turn's messages are stored by then) or a transport failure. */
  onSettled: (turn: LiveTurn) => void;
  /** When this tab's send was accepted, or a turn from elsewhere appeared (the turn runs on the server). */
  onStarted?: () => void;
  /** This tab's send was accepted: its turn runs. */
  onAccepted?: () => void;
  /** This tab's send was refused before a turn started (a turn already runs, too long, no access). */
  onRefused?: (refusal: SendRefusal) => void;
}) {
  const trpc = useTRPC();
  const client = useTRPCClient();
  const [turn, setTurn] = useState<LiveTurn | null>(null);
  const [cancelling, setCancelling] = useState(false);
  const stopRef = useRef<(() => void) | null>(null);
  const turnRef = useRef<LiveTurn | null>(null);
  // Which turn `turn` shows when it came from `chat.follow` (null: this tab's own send, or none).
  const followedRef = useRef<string | null>(null);
  // This tab's sends (their idempotency keys) and the turns they started: `chat.follow` announces those
  // too, and this tab shows them from its own stream already.
  const ownKeysRef = useRef(new Set<string>());
  const ownTurnsRef = useRef(new Set<string>());
  // This tab's accepted send is streaming: no other turn can run in the session meanwhile.
  const ownStreamingRef = useRef(false);

  const update = useCallback((next: LiveTurn) => {
    turnRef.current = next;
    setTurn(next);
  }, []);

  // Exactly once per turn: unsubscribing can itself report completion, which must not settle it again
  // with the turn as it was before `done`.
  const settle = useCallback(
    (final: LiveTurn) => {
      if (turnRef.current?.phase === "done") return;
      update(final);
      setCancelling(false);
      followedRef.current = null;
      ownStreamingRef.current = false;
      onSettled(final);
      const stop = stopRef.current;
      stopRef.current = null;
      stop?.();
    },
    [onSettled, update],
  );

  const fold = useCallback(
    (event: TChatTurnEvent) => {
      const next = applyTurnEvent(turnRef.current ?? startingTurn(""), event);
      if (next.phase === "done") settle(next);
      else update(next);
    },
    [settle, update],
  );

  useSubscription(
    trpc.chat.follow.subscriptionOptions(
      { tenantSlug, sessionId },
      {
        onData: (data) => {
          if (data.type === "keepalive" || ownTurnsRef.current.has(data.turnId)) return;
          if (data.type === "turn") {
            if (data.idempotencyKey !== null && ownKeysRef.current.has(data.idempotencyKey)) {
              ownTurnsRef.current.add(data.turnId);
              return;
            }
            if (ownStreamingRef.current) return; // an announcement older than this tab's own turn
            // Another tab's turn (or one running when the page loaded); a reconnected stream announces
            // the turn it shows again, replayed from its start.
            followedRef.current = data.turnId;
            update(startingTurn(data.userMessage));
            onStarted?.();
            return;
          }
          if (followedRef.current === data.turnId) fold(data.event);
        },
      },
    ),
  );

  const send = useCallback(
    /** `checkpointFirst`: a risky turn, the workspace recorded before it runs too. */
    (message: string, options: { checkpointFirst?: boolean } = {}) => {
      const start = startingTurn(message);
      followedRef.current = null;
      update(start);
      // Aborting the request only stops this stream (after `done`, or when the page goes away): the turn
      // runs on the server to its end; `cancel` stops it.
      const controller = new AbortController();
      stopRef.current = () => controller.abort();
      // One key per message: when the connection drops mid-turn (the server process died, a network
      // blip), the same send goes again and the server reports the original turn instead of running it
      // twice (it may have run tools). It also tells this send's turn apart on `chat.follow`.
      const idempotencyKey = crypto.randomUUID();
      ownKeysRef.current.add(idempotencyKey);
      let accepted = false;
      const accept = () => {
        if (accepted) return;
        accepted = true;
        ownStreamingRef.current = true;
        onAccepted?.();
        onStarted?.();
      };
      const fail = (error: unknown) => {
        const reason: TurnError = {
          code: errorCodeOf(error),
          message: error instanceof Error ? error.message : String(error),
          retryable: false,
        };
        if (!accepted) {
          // Refused: nothing ran (the page shows another tab's running turn instead, if it heard of one).
          // Unless the answer was lost on the way: then `chat.follow` shows the turn like another tab's.
          ownKeysRef.current.delete(idempotencyKey);
          if (followedRef.current === null) {
            turnRef.current = null;
            setTurn(null);
          }
          onRefused?.(reason);
          return;
        }
        settle({ ...(turnRef.current ?? start), phase: "done", status: "failed", error: reason });
      };
      void (async () => {
        for (let attempt = 0; ; attempt++) {
          try {
            const events = await client.chat.send.mutate(
              {
                tenantSlug,
                sessionId,
                message,
                idempotencyKey,
                ...(options.checkpointFirst ? { checkpointFirst: true } : {}),
              },
              { signal: controller.signal },
            );
            accept();
            for await (const event of events) if (followedRef.current === null) fold(event);
            const current = turnRef.current;
            if (current && current.phase !== "done")
              throw new Error("The connection closed before the reply ended.");
            return;
          } catch (error) {
            // An abort we asked for after `done` is not a failure.
            if (controller.signal.aborted && turnRef.current?.phase === "done") return;
            if (!controller.signal.aborted && attempt < 2 && isTransportFailure(error)) {
              await new Promise((resolve) => setTimeout(resolve, 1_000 * (attempt + 1)));
              update(start); // the server reports the whole turn again
              continue;
            }
            fail(error);
            return;
          }
        }
      })();
    },
    [client, fold, onAccepted, onRefused, onStarted, sessionId, settle, tenantSlug, update],
  );

  const cancel = useCallback(async () => {
    setCancelling(true);
    try {
      await client.chat.cancel.mutate({ tenantSlug, sessionId });
    } catch {
      setCancelling(false);
    }
  }, [client, sessionId, tenantSlug]);

  /** Forgets a finished turn (once the history shows it). */
  const reset = useCallback(() => {
    turnRef.current = null;
    setTurn(null);
  }, []);

  return { turn, send, cancel, reset, cancelling, streaming: turn?.phase === "streaming" };
}

/**
 * The code of a failed call: Berth's own when the server sent one (`QUOTA_EXCEEDED` rather than tRPC's
 * `TOO_MANY_REQUESTS`), else tRPC's (`FORBIDDEN`, `CONFLICT`, …), or `ERROR` when the call never got one.
 */
function errorCodeOf(error: unknown): string {
  if (!(error instanceof TRPCClientError)) return "ERROR";
  const data: unknown = error.data;
  const appCode = (data as { appError?: { code?: unknown } } | null)?.appError?.code;
  if (typeof appCode === "string") return appCode;
  if (typeof data === "object" && data !== null && "code" in data && typeof data.code === "string")
    return data.code;
  return "ERROR";
}
