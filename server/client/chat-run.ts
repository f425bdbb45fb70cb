import { TRPCClientError } from "@trpc/client";
import type { TChatTurnEvent, TTurnStatus, TTurnUsage } from "@/server/agent/agent.schema";

/**
 * What `chat.run` takes: the session, the message, and (with an API key) no tenant reference needed.
 * `idempotencyKey`: the send's key (default: a new UUID per call); the same key never runs a turn twice.
 */
export type ChatRunInput = {
  sessionId: string;
  message: string;
  tenantId?: string;
  tenantSlug?: string;
  idempotencyKey?: string;
};

export type ChatRunOptions = {
  /**
   * Aborting cancels the turn: `chat.run` then calls `chat.cancel` (the server never cancels a turn because
   * its connection closed). Ignored before the turn started (a refused send cancels nothing).
   */
  signal?: AbortSignal;
  /** Every event as it arrives (text deltas to print as they stream, tool calls, ...). */
  onEvent?: (event: TChatTurnEvent) => void;
  /**
   * How often the same send goes again (same idempotency key) after the connection broke before `done`
   * (default 3, with 0.5 s, 1 s, 2 s … between): the server then reports the original turn's outcome.
   */
  resends?: number;
  /**
   * A stream that delivers nothing (not even the server's 15 s `keepalive`) for this long is taken for a
   * dead connection and the send goes again (default 60 s).
   */
  idleTimeoutMs?: number;
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
  /**
   * `completed`, `cancelled`, `failed` (then `error` says why), or `interrupted`: the server process running
   * the turn died before it ended (its tools may have run; the session's history shows what was stored).
   */
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

/** The `chat.cancel` call `runChatTurn` makes when its `signal` aborts (the typed client's). */
export type ChatCancel = (input: {
  sessionId: string;
  tenantId?: string;
  tenantSlug?: string;
}) => Promise<unknown>;

/**
 * Whether a call failed on the way (no answer from the server: refused or reset connection, a stream that
 * broke or ended before `done`) rather than with the server's typed error (which carries `data.code`).
 */
export function isTransportFailure(error: unknown): boolean {
  if (error instanceof TRPCClientError) {
    const data: unknown = error.data;
    return !(typeof data === "object" && data !== null && "code" in data);
  }
  return error instanceof Error && error.name !== "AbortError";
}

/**
 * Runs one chat turn to its end: sends the message over `chat.send`'s stream, collects the events and
 * resolves with the final text, usage and status. Rejects, before any event, with the call's error
 * (`TRPCClientError`: NOT_FOUND, FORBIDDEN, CONFLICT while another turn of the session runs, ...). When the
 * connection breaks before `done` (the server died), the same send goes again with the same idempotency
 * key, so the turn never runs twice: the server reports its outcome (`interrupted` when its process died);
 * when every resend fails it rejects with an Error saying the outcome is unknown. A turn that fails
 * inside (the model refused, a provider error) RESOLVES with `status: "failed"` and `error`.
 */
export async function runChatTurn(
  send: ChatSend,
  input: ChatRunInput,
  options: ChatRunOptions = {},
  cancel?: ChatCancel,
): Promise<ChatRunResult> {
  const keyed = { ...input, idempotencyKey: input.idempotencyKey ?? globalThis.crypto.randomUUID() };
  const resends = options.resends ?? 3;
  const events: TChatTurnEvent[] = [];
  const toolCalls = new Map<string, ChatRunToolCall>();
  for (let attempt = 0; ; attempt++) {
    try {
      return await streamOnce(send, keyed, options, events, toolCalls, cancel);
    } catch (error) {
      if (options.signal?.aborted || !isTransportFailure(error)) throw error;
      if (attempt >= resends) {
        throw new Error(
          `chat.send lost its connection before the turn finished (${describeError(error)}); ` +
            `its outcome is unknown: send again with idempotencyKey ${keyed.idempotencyKey} to learn it`,
          { cause: error },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt));
    }
  }
}

async function streamOnce(
  send: ChatSend,
  input: ChatRunInput,
  options: ChatRunOptions,
  events: TChatTurnEvent[],
  toolCalls: Map<string, ChatRunToolCall>,
  cancel: ChatCancel | undefined,
): Promise<ChatRunResult> {
  // A resend's stream reports the whole turn again: the text starts over.
  let text = "";
  let error: ChatRunResult["error"] = null;
  // The request's own signal: the caller's, or the idle watchdog's when the stream goes silent.
  const request = new AbortController();
  // Aborting stops this stream and cancels the turn, explicitly (the server lets a turn whose connection
  // closed run on). While the send is in flight it may be claiming the turn: it is let through, then
  // cancelled; a send refused before any turn started cancels nothing.
  options.signal?.throwIfAborted();
  let started = false;
  const cancelTurn = () =>
    cancel?.({
      sessionId: input.sessionId,
      ...(input.tenantId ? { tenantId: input.tenantId } : {}),
      ...(input.tenantSlug ? { tenantSlug: input.tenantSlug } : {}),
    }).catch(() => undefined);
  const forward = () => {
    if (!started) return;
    request.abort(options.signal?.reason);
    void cancelTurn();
  };
  options.signal?.addEventListener("abort", forward, { once: true });
  const idleTimeoutMs = options.idleTimeoutMs ?? 60_000;
  let silent: ReturnType<typeof setTimeout> | undefined;
  const watch = () => {
    clearTimeout(silent);
    silent = setTimeout(() => request.abort(new IdleStreamError(idleTimeoutMs)), idleTimeoutMs);
  };
  try {
    watch();
    const stream = await send(input, { signal: request.signal });
    started = true;
    if (options.signal?.aborted) forward();
    return await consume(stream);
  } catch (thrown) {
    const reason: unknown = request.signal.reason;
    throw reason instanceof IdleStreamError ? reason : thrown;
  } finally {
    clearTimeout(silent);
    options.signal?.removeEventListener("abort", forward);
  }

  async function consume(stream: AsyncIterable<TChatTurnEvent>): Promise<ChatRunResult> {
    for await (const event of stream) {
      watch();
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
        case "keepalive":
          break;
      }
    }
    throw new Error("chat.send ended without a done event (the connection closed before the turn finished)");
  }
}

/** The stream went silent for longer than the idle timeout: the connection is taken for dead. */
class IdleStreamError extends Error {
  constructor(idleTimeoutMs: number) {
    super(`chat.send delivered nothing for ${idleTimeoutMs} ms (not even a keepalive)`);
    this.name = "IdleStreamError";
  }
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
