import { z } from "zod";

export const SESSION_STATUSES = ["IDLE", "RUNNING", "ERROR", "CLOSED"] as const;
export const ZSessionStatus = z.enum(SESSION_STATUSES);
export type SessionStatus = z.infer<typeof ZSessionStatus>;

export const CHAT_ROLES = ["system", "user", "assistant", "tool"] as const;
export const ZChatRole = z.enum(CHAT_ROLES);

export const ZCreateSessionInput = z.object({
  agentId: z.string().min(1),
  /** Chosen by the isolation policy; fixed for the session's whole life. */
  workspaceId: z.string().min(1).max(200),
  name: z.string().max(200).default(""),
  /** Defaults to the scope's user. */
  userId: z.string().nullish(),
  leaderSessionId: z.string().nullish(),
});
export type TCreateSessionInput = z.input<typeof ZCreateSessionInput>;

/** Deliberately has no workspaceId: a session's workspace never changes. */
export const ZUpdateSessionInput = z.object({
  name: z.string().max(200).optional(),
  status: ZSessionStatus.optional(),
  lastMessageAt: z.date().optional(),
});
export type TUpdateSessionInput = z.input<typeof ZUpdateSessionInput>;

export const ZSessionDTO = z.object({
  id: z.string(),
  agentId: z.string(),
  userId: z.string().nullable(),
  workspaceId: z.string(),
  name: z.string(),
  status: ZSessionStatus,
  leaderSessionId: z.string().nullable(),
  lastMessageAt: z.date().nullable(),
  createdAt: z.date(),
  updatedAt: z.date(),
});
export type SessionDTO = z.infer<typeof ZSessionDTO>;

export const ZAppendChatMessageInput = z.object({
  role: ZChatRole,
  content: z.unknown(),
  toolCalls: z.unknown().optional(),
});
export type TAppendChatMessageInput = z.input<typeof ZAppendChatMessageInput>;

export const ZChatMessageDTO = z.object({
  id: z.string(),
  sessionId: z.string(),
  role: ZChatRole,
  content: z.unknown(),
  toolCalls: z.unknown().nullable(),
  createdAt: z.date(),
});
export type ChatMessageDTO = z.infer<typeof ZChatMessageDTO>;
