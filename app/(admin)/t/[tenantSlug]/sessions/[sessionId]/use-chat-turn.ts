"use client";

import { TRPCClientError } from "@trpc/client";
import { useCallback, useRef, useState } from "react";
import { useTRPCClient } from "@/app/_trpc/client";
import type { TChatTurnEvent, TTurnStatus, TTurnUsage } from "@/server/modules/chat/chat.schema";
import { isTransportFailure } from "@/server/client/chat-run";

/** One tool call of the live turn, its result attached when it arrives. */
type LiveToolCall = {
  kind: "tool";
  toolCallId: string;
  toolName: string;
  input: unknown;
  result?: Extract<TChatTurnEvent, { type: "tool-result" }>;
};

/** What the live turn shows, in arrival order: text runs, tool calls, offloads. */
type LiveItem =
  | { kind: "text"; text: string }
  | LiveToolCall
  | { kind: "offload"; event: Extract<TChatTurnEvent, { type: "offload" }> };

export type TurnError = { code: string; message: string; retryable: boolean };

export type LiveTurn = {
  userMessage: string;
  items: LiveItem[];
  phase: "streaming" | "done";
  error: TurnError | null;
  /** Set by `done`. */
  status: TTurnStatus | null;
  usage: TTurnUsage | null;
  steps: number | null;
};

/** Folds one event into the turn (pure, so the order of events is all that matters). */
function applyTurnEvent(turn: LiveTurn, event: TChatTurnEvent): LiveTurn {
  switch (event.type) {
    case "text-delta": {
      const last = turn.items.at(-1);
      const items =
        last?.kind === "text"
          ? [...turn.items.slice(0, -1), { kind: "text" as const, text: last.text + event.text }]
          : [...turn.items, { kind: "text" as const, text: event.text }];
      return { ...turn, items };
    }
    case "tool-call":
      return {
        ...turn,
        items: [
          ...turn.items,
          { kind: "tool", toolCallId: event.toolCallId, toolName: event.toolName, input: event.input },
        ],
      };
    case "tool-result":
      return {
        ...turn,
        items: turn.items.map((item) =>
          item.kind === "tool" && item.toolCallId === event.toolCallId ? { ...item, result: event } : item,
        ),
      };
    case "offload":
      // A tool result's offload is shown on its tool call (the result carries `offloadedTo`).
      return event.kind === "tool-result"
        ? turn
        : { ...turn, items: [...turn.items, { kind: "offload", event }] };
    case "error":
      return { ...turn, error: { code: event.code, message: event.message, retryable: event.retryable } };
    case "done":
      return { ...turn, phase: "done", status: event.status, usage: event.usage, steps: event.steps };
    case "keepalive":
      return turn;
  }
}

/**
 * The chat transport, in one place: `send` starts a turn through `chat.send` and folds its events into
 * `turn`; `cancel` asks the server to stop it (`chat.cancel`, which works from any process). `chat.send` is a
 * POST mutation streaming its events (see server/client/README.md).
 */
export function useChatTurn({
  tenantSlug,
  sessionId,
  onSettled,
  onStarted,
}: {
  tenantSlug: string;
  sessionId: string;
  /** After `done` (the turn's messages are stored by then) or a transport failure. */
  onSettled: (turn: LiveTurn) => void;
  /** When the first event arrives (the turn is running on the server by then). */
  onStarted?: () => void;
}) {
  const client = useTRPCClient();
  const [turn, setTurn] = useState<LiveTurn | null>(null);
  const [cancelling, setCancelling] = useState(false);
  const stopRef = useRef<(() => void) | null>(null);
  const turnRef = useRef<LiveTurn | null>(null);

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
      onSettled(final);
      const stop = stopRef.current;
      stopRef.current = null;
      stop?.();
    },
    [onSettled, update],
  );

  const send = useCallback(
    (message: string) => {
      const start: LiveTurn = {
        userMessage: message,
        items: [],
        phase: "streaming",
        error: null,
        status: null,
        usage: null,
        steps: null,
      };
      update(start);
      // `chat.send` is a POST mutation whose result is the turn's event stream (httpBatchStreamLink):
      // aborting the request cancels the turn on the server, like `chat.cancel`.
      const controller = new AbortController();
      stopRef.current = () => controller.abort();
      const fail = (error: unknown) =>
        settle({
          ...(turnRef.current ?? start),
          phase: "done",
          status: "failed",
          error: {
            code: errorCodeOf(error),
            message: error instanceof Error ? error.message : String(error),
            retryable: false,
          },
        });
      // One key per message: when the connection drops mid-turn (the server process died, a network
      // blip), the same send goes again and the server reports the original turn instead of running it
      // twice (it may have run tools).
      const idempotencyKey = crypto.randomUUID();
      void (async () => {
        for (let attempt = 0; ; attempt++) {
          try {
            const events = await client.chat.send.mutate(
              { tenantSlug, sessionId, message, idempotencyKey },
              { signal: controller.signal },
            );
            for await (const event of events) {
              if (turnRef.current?.items.length === 0 && turnRef.current.phase === "streaming") onStarted?.();
              const next = applyTurnEvent(turnRef.current ?? start, event);
              if (next.phase === "done") settle(next);
              else update(next);
            }
            const current = turnRef.current;
            if (current && current.phase !== "done")
              throw new Error("The connection closed before the reply ended.");
            return;
          } catch (error) {
            // Rejected before the turn started (a running turn, no access) or the connection broke;
            // an abort we asked for after `done` is not a failure.
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
    [client, onStarted, sessionId, settle, tenantSlug, update],
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
