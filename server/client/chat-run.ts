import type { TChatTurnEvent, TTurnStatus, TTurnUsage } from "@/server/modules/chat/chat.schema";

/** What `chat.run` takes: the session, the message, and (with an API key) no tenant reference needed. */
export type ChatRunInput = { sessionId: string; message: string; tenantId?: string; tenantSlug?: string };

export type ChatRunOptions = {
  /** Aborting cancels the turn (as a closed connection does). */
  signal?: AbortSignal;
  /** Every event as it arrives (text deltas to print as they stream, tool calls, ...). */
  onEvent?: (event: TChatTurnEvent) => void;
};

/** A tool call of the turn with its result (when the tool finished). */
export type ChatRunToolCall = {
  toolCallId: string;
  toolName: string;
  input: unknown;
  output: string | null;
  isError: boolean;
};

/** A finished turn: resolved once `done` arrived, i.e. after the turn's messages are stored. */
export type ChatRunResult = {
  /** `completed`, `cancelled`, or `failed` (then `error` says why). */
  status: TTurnStatus;
  /** The assistant's text: every text delta of the turn, joined. */
  text: string;
  usage: TTurnUsage;
  /** The finish reason of the last model step ("stop", "length", ...) or null. */
  finishReason: string | null;
  steps: number;
  toolCalls: ChatRunToolCall[];
  /** The turn's error event (a failure inside the turn), or null. */
  error: Extract<TChatTurnEvent, { type: "error" }> | null;
  /** Every event in order. */
  events: TChatTurnEvent[];
};

/** The `chat.send` call `runChatTurn` drives (the typed client's `client.chat.send.mutate`). */
export type ChatSend = (
  input: ChatRunInput,
  options?: { signal?: AbortSignal },
) => Promise<AsyncIterable<TChatTurnEvent>>;

/**
 * Runs one chat turn to its end: sends the message over `chat.send`'s stream, collects the events and
 * resolves with the final text, usage and status. Rejects, before any event, with the call's error
 * (`TRPCClientError`: NOT_FOUND, FORBIDDEN, CONFLICT while another turn of the session runs, ...), and with
 * an Error when the stream ends without `done` (the connection dropped). A turn that fails inside (the model
 * refused, a provider error) RESOLVES with `status: "failed"` and `error`.
 */
export async function runChatTurn(
  send: ChatSend,
  input: ChatRunInput,
  options: ChatRunOptions = {},
): Promise<ChatRunResult> {
  const events: TChatTurnEvent[] = [];
  const toolCalls = new Map<string, ChatRunToolCall>();
  let text = "";
  let error: ChatRunResult["error"] = null;
  const stream = await send(input, options.signal ? { signal: options.signal } : {});
  for await (const event of stream) {
    events.push(event);
    options.onEvent?.(event);
    switch (event.type) {
      case "text-delta":
        text += event.text;
        break;
      case "tool-call":
        toolCalls.set(event.toolCallId, { ...event, output: null, isError: false });
        break;
      case "tool-result": {
        const call = toolCalls.get(event.toolCallId);
        toolCalls.set(event.toolCallId, {
          toolCallId: event.toolCallId,
          toolName: event.toolName,
          input: call?.input ?? null,
          output: event.output,
          isError: event.isError,
        });
        break;
      }
      case "error":
        error = event;
        break;
      case "done":
        return {
          status: event.status,
          text,
          usage: event.usage,
          finishReason: event.finishReason,
          steps: event.steps,
          toolCalls: [...toolCalls.values()],
          error,
          events,
        };
      case "offload":
        break;
    }
  }
  throw new Error("chat.send ended without a done event (the connection closed before the turn finished)");
}
