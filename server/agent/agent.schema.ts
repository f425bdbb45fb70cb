import { z } from "zod";
import { APP_ERROR_CODES, type AppErrorCode } from "@/server/shared/errors";

/**
 * The events of one chat turn, in the order the client sees them. `chat.send` streams exactly these
 * (validate them with `ZChatTurnEvent` as chat.send's streamed output). A turn always ends with one `done`.
 */
const ZAppErrorCode = z.enum(Object.keys(APP_ERROR_CODES) as [AppErrorCode, ...AppErrorCode[]]);

const ZTurnUsage = z.object({
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  totalTokens: z.number().int().nonnegative(),
});

export const ZChatTurnEvent = z.discriminatedUnion("type", [
  /** A piece of the assistant's text. */
  z.object({ type: z.literal("text-delta"), text: z.string() }),
  /** The model asked for a tool; `input` is the parsed JSON arguments. */
  z.object({
    type: z.literal("tool-call"),
    toolCallId: z.string(),
    toolName: z.string(),
    input: z.unknown(),
  }),
  /** A tool finished. `output` is what the model sees (the offload note when it was offloaded). */
  z.object({
    type: z.literal("tool-result"),
    toolCallId: z.string(),
    toolName: z.string(),
    output: z.string(),
    isError: z.boolean(),
    /** The workspace reference of the full result when it was offloaded. */
    offloadedTo: z.string().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  }),
  /** Content moved to the workspace: a large tool result, or the compacted old part of the history. */
  z.object({
    type: z.literal("offload"),
    kind: z.enum(["tool-result", "context"]),
    reference: z.string(),
    bytes: z.number().int().nonnegative(),
    toolCallId: z.string().optional(),
    messageCount: z.number().int().nonnegative().optional(),
  }),
  /**
   * Sent every 15 s while nothing else is (a long tool call): a client that hears nothing for much longer
   * knows its connection is dead even when no socket error arrives (a half-open connection).
   */
  z.object({ type: z.literal("keepalive") }),
  /** The turn failed (model/provider error, configuration problem). `message` is safe to show. */
  z.object({ type: z.literal("error"), code: ZAppErrorCode, message: z.string(), retryable: z.boolean() }),
  z.object({
    type: z.literal("done"),
    /** `interrupted`: reported for a send whose turn died with its server process (see chat-turn.data.ts). */
    status: z.enum(["completed", "cancelled", "failed", "interrupted"]),
    /** The AI SDK finish reason of the last step ("stop", "tool-calls", "length", ...) or null. */
    finishReason: z.string().nullable(),
    usage: ZTurnUsage,
    steps: z.number().int().nonnegative(),
  }),
]);

export type TChatTurnEvent = z.infer<typeof ZChatTurnEvent>;
export type TTurnUsage = z.infer<typeof ZTurnUsage>;
export type TTurnStatus = Extract<TChatTurnEvent, { type: "done" }>["status"];

/**
 * Tunables of a turn. Defaults suit a 128k-context model; the service passes per-agent values.
 * Token counts are estimates (about 4 characters per token), which is enough for budgeting.
 */
export const ZTurnLimits = z.object({
  /** Model calls per turn (each tool round trip is one step). */
  maxSteps: z.number().int().positive().default(25),
  /** Tool results larger than this (UTF-8 bytes) are offloaded and replaced by a note with a preview. */
  toolResultOffloadBytes: z
    .number()
    .int()
    .positive()
    .default(16 * 1024),
  /** Characters of an offloaded tool result kept inline as a preview. */
  toolResultPreviewChars: z.number().int().nonnegative().default(2000),
  /** When the history's estimated tokens exceed this, the oldest part is offloaded and summarised. */
  historyTokenBudget: z.number().int().positive().default(60_000),
  /** After compaction, at most this many estimated tokens of recent history stay verbatim. */
  keepRecentTokens: z.number().int().positive().default(20_000),
  /** Ask the model itself for the compaction summary (one extra call); falls back to the built-in one. */
  summarizeCompactedContext: z.boolean().default(false),
  /** Provider retries for retryable HTTP errors (429, 5xx) per model call. */
  maxRetries: z.number().int().nonnegative().default(2),
  /** Per tool call; a tool that runs longer is aborted and reported to the model as an error. */
  toolTimeoutMs: z
    .number()
    .int()
    .positive()
    .default(10 * 60_000),
});

export type TTurnLimits = z.infer<typeof ZTurnLimits>;
export type TTurnLimitsInput = z.input<typeof ZTurnLimits>;
