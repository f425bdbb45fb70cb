import { z } from "zod";
import { type WorkspaceEnv, ZWorkspaceEnv } from "@/server/workspace/workspace-env";

const SESSION_STATUSES = ["IDLE", "RUNNING", "ERROR", "CLOSED", "INTERRUPTED"] as const;
const ZSessionStatus = z.enum(SESSION_STATUSES);
type SessionStatus = z.infer<typeof ZSessionStatus>;

const CHAT_ROLES = ["system", "user", "assistant", "tool"] as const;
const ZChatRole = z.enum(CHAT_ROLES);

export const ZCreateSessionInput = z.object({
  agentId: z.string().min(1),
  /** Chosen by the isolation policy; fixed for the session's whole life. */
  workspaceId: z.string().min(1).max(200),
  name: z.string().max(200).default(""),
  env: ZWorkspaceEnv.default({}),
  /** Defaults to the scope's user. */
  userId: z.string().nullish(),
  leaderSessionId: z.string().nullish(),
  /** `scopedCreateKey` of the request's idempotency key: unique per tenant. */
  createKey: z.string().min(1).max(400).nullish(),
});
export type TCreateSessionInput = z.input<typeof ZCreateSessionInput>;

/** Deliberately has no workspaceId: a session's workspace never changes. */
export const ZUpdateSessionInput = z.object({
  name: z.string().max(200).optional(),
  env: ZWorkspaceEnv.optional(),
  status: ZSessionStatus.optional(),
  lastMessageAt: z.date().optional(),
});
export type TUpdateSessionInput = z.input<typeof ZUpdateSessionInput>;

export type SessionDTO = {
  id: string;
  agentId: string;
  userId: string | null;
  workspaceId: string;
  name: string;
  /** Environment variables of this session's commands, over its agent's (not secret). */
  env: WorkspaceEnv;
  status: SessionStatus;
  leaderSessionId: string | null;
  lastMessageAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
};

export const ZAppendChatMessageInput = z.object({
  role: ZChatRole,
  content: z.unknown(),
  toolCalls: z.unknown().optional(),
  /** The turn storing it (its checkpoint, its revert). */
  turnId: z.string().optional(),
});
export type TAppendChatMessageInput = z.input<typeof ZAppendChatMessageInput>;

export type ChatMessageDTO = {
  id: string;
  sessionId: string;
  role: z.infer<typeof ZChatRole>;
  content: unknown;
  toolCalls: unknown;
  /** The turn that stored it (null for messages stored before turns were recorded on them). */
  turnId: string | null;
  /** A revert to an earlier turn undid this message's turn: shown, but no longer in the model's context. */
  reverted: boolean;
  createdAt: Date;
};
