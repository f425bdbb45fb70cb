import { z } from "zod";

/** The longest message `chat.send` takes, in characters (the dashboard checks it before sending). */
export const CHAT_MESSAGE_MAX_CHARS = 200_000;

/** One turn of a session as `chat.turns` lists it: how it ended and why (chat-turn.data.ts). */
export type ChatTurnSummaryDTO = {
  id: string;
  status: "RUNNING" | "COMPLETED" | "CANCELLED" | "FAILED" | "INTERRUPTED";
  startedAt: Date;
  endedAt: Date | null;
  /** Why it failed or was interrupted (safe to show), null otherwise. */
  error: { code: string; message: string } | null;
  /** The user's message, for turns that did not complete (their messages may not all be stored). */
  userMessage: string | null;
};

/** `chat.send`'s input (turn-send.ts). */
export const ZChatSendRequest = z.object({
  sessionId: z.string().min(1).max(200),
  message: z.string().min(1).max(CHAT_MESSAGE_MAX_CHARS),
  /**
   * A risky turn: record the workspace's folder before it runs too (a BEFORE_TURN checkpoint), so what
   * changed since the last turn outside of turns (uploads, a terminal) can be restored as well.
   */
  checkpointFirst: z.boolean().optional(),
  /**
   * The client's key of this send (one per message, reused when it sends the same message again after a
   * lost connection): a send with a key the session has seen runs nothing and reports that turn instead.
   */
  idempotencyKey: z
    .string()
    .regex(/^[A-Za-z0-9._:-]{8,128}$/, "8 to 128 letters, digits, '.', '_', ':' or '-'")
    .optional(),
});

/** `chat.history`'s input. */
export const ZChatHistoryRequest = z.object({
  sessionId: z.string().min(1).max(200),
  limit: z.number().int().min(1).max(200).optional(),
  afterId: z.string().min(1).max(200).optional(),
});
