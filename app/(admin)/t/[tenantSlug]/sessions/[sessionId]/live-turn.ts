import type { TChatTurnEvent, TTurnStatus, TTurnUsage } from "@/server/agent/agent.schema";

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
export function applyTurnEvent(turn: LiveTurn, event: TChatTurnEvent): LiveTurn {
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

/** A turn that just started streaming (the user's message, nothing from the model yet). */
export function startingTurn(userMessage: string): LiveTurn {
  return { userMessage, items: [], phase: "streaming", error: null, status: null, usage: null, steps: null };
}
