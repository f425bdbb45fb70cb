import type { z } from "zod";
import { storedWorkspaceEnv } from "@/server/workspace/workspace-env";
import { parseInput } from "@/server/shared/parse-input";
import { Prisma } from "@/generated/prisma/client";
import { type Db, type DbClient, inTransaction, isUniqueViolation, pageSize } from "@/server/db";
import { upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import type { TUpsertWorkspaceInput } from "@/server/modules/workspace/workspace.types";
import type { QuotaDeps } from "@/server/modules/quota/quota.service";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import { createKeyTaken } from "@/server/shared/idempotency";
import { type Page, pageArgs, paginate } from "@/server/shared/page";
import {
  type ChatMessageDTO,
  type SessionDTO,
  type TAppendChatMessageInput,
  type TCreateSessionInput,
  type TUpdateSessionInput,
  ZAppendChatMessageInput,
  ZCreateSessionInput,
  ZUpdateSessionInput,
} from "@/server/modules/session/session.types";

const sessionSelect = {
  id: true,
  agentId: true,
  userId: true,
  workspaceId: true,
  name: true,
  env: true,
  status: true,
  leaderSessionId: true,
  lastMessageAt: true,
  createdAt: true,
  updatedAt: true,
} satisfies Prisma.SessionSelect;

type SessionRow = Prisma.SessionGetPayload<{ select: typeof sessionSelect }>;

function toSessionDTO(row: SessionRow): SessionDTO {
  return { ...row, env: storedWorkspaceEnv(row.env) };
}

/**
 * Creates a session bound to `workspaceId` for good. The agent and the leader session must belong
 * to the same tenant (checked here, since the foreign keys alone would accept another tenant's).
 */
/**
 * Creates a session. With `binding`, its workspace binding row is written in the same transaction, so a
 * binding that fails (an id another tenant holds) leaves no session behind, and no session exists without
 * its binding.
 */
export async function createSession(
  scope: TenantScope,
  rawInput: TCreateSessionInput,
  db: DbClient,
  options: { binding?: { workspace: TUpsertWorkspaceInput; quota: Pick<QuotaDeps, "config"> } } = {},
): Promise<SessionDTO> {
  const input = parseInput(ZCreateSessionInput, rawInput);
  const created = inTransaction(db, async (tx) => {
    const agent = await tx.agent.findFirst({
      where: { tenantId: scope.tenantId, id: input.agentId },
      select: { id: true },
    });
    if (!agent)
      throw new AppError("NOT_FOUND", `agent ${input.agentId} not found`, {
        userMessage: "Agent not found.",
      });
    if (input.leaderSessionId) await getSession(scope, input.leaderSessionId, tx);
    const userId = input.userId === undefined ? scope.userId : input.userId;
    if (userId) {
      const member = await tx.membership.findFirst({
        where: { tenantId: scope.tenantId, userId },
        select: { id: true },
      });
      if (!member)
        throw new AppError("BAD_REQUEST", `user ${userId} is not a member`, { userMessage: "Unknown user." });
    }
    if (options.binding)
      await upsertWorkspaceBinding(scope, options.binding.workspace, options.binding.quota, tx);
    return tx.session.create({
      data: {
        tenantId: scope.tenantId,
        agentId: input.agentId,
        userId,
        workspaceId: input.workspaceId,
        name: input.name,
        env: input.env,
        leaderSessionId: input.leaderSessionId ?? null,
        createKey: input.createKey ?? null,
      },
      select: sessionSelect,
    });
  }).then(toSessionDTO);
  return created.catch((error: unknown) => {
    // A concurrent create with the same key won: the service answers with its session.
    throw input.createKey && isUniqueViolation(error, "create_key") ? createKeyTaken() : error;
  });
}

export async function getSessionOrNull(
  scope: TenantScope,
  sessionId: string,
  db: DbClient,
): Promise<SessionDTO | null> {
  const row = await db.session.findFirst({
    where: { tenantId: scope.tenantId, id: sessionId },
    select: sessionSelect,
  });
  return row && toSessionDTO(row);
}

/** The session a create with this `createKey` made (see `scopedCreateKey`), with its creation time. */
export async function findSessionByCreateKey(
  scope: TenantScope,
  createKey: string,
  db: DbClient,
): Promise<SessionDTO | null> {
  const row = await db.session.findUnique({
    where: { tenantId_createKey: { tenantId: scope.tenantId, createKey } },
    select: sessionSelect,
  });
  return row && toSessionDTO(row);
}

export async function getSession(scope: TenantScope, sessionId: string, db: DbClient): Promise<SessionDTO> {
  const session = await getSessionOrNull(scope, sessionId, db);
  if (!session) throw sessionNotFound(sessionId);
  return session;
}

/** Most recently active first. */
export async function listSessions(
  scope: TenantScope,
  options: {
    agentId?: string;
    userId?: string;
    workspaceId?: string;
    leaderSessionId?: string;
    limit?: number;
    cursor?: string;
  } = {},
  db: DbClient,
): Promise<Page<SessionDTO>> {
  const take = pageSize(options.limit);
  const rows = await db.session.findMany({
    where: {
      tenantId: scope.tenantId,
      ...(options.agentId ? { agentId: options.agentId } : {}),
      ...(options.userId ? { userId: options.userId } : {}),
      ...(options.workspaceId ? { workspaceId: options.workspaceId } : {}),
      ...(options.leaderSessionId ? { leaderSessionId: options.leaderSessionId } : {}),
    },
    select: sessionSelect,
    orderBy: [{ updatedAt: "desc" }, { id: "desc" }],
    ...pageArgs(take, options.cursor),
  });
  return paginate(rows.map(toSessionDTO), take);
}

/** Renames, changes status or replaces the environment. The workspace id cannot be changed (and a DB trigger refuses it). */
export async function updateSession(
  scope: TenantScope,
  sessionId: string,
  rawPatch: TUpdateSessionInput,
  db: DbClient,
): Promise<SessionDTO> {
  const patch = parseInput(ZUpdateSessionInput, rawPatch);
  const { count } = await db.session.updateMany({
    where: { tenantId: scope.tenantId, id: sessionId },
    data: patch,
  });
  if (count === 0) throw sessionNotFound(sessionId);
  return getSession(scope, sessionId, db);
}

/** Deletes the session and its messages. Team workers keep existing with `leaderSessionId` cleared. */
export async function deleteSession(scope: TenantScope, sessionId: string, db: DbClient): Promise<void> {
  const { count } = await db.session.deleteMany({ where: { tenantId: scope.tenantId, id: sessionId } });
  if (count === 0) throw sessionNotFound(sessionId);
}

// -------------------------------------------------------------------------------- chat messages

const messageSelect = {
  id: true,
  sessionId: true,
  role: true,
  content: true,
  toolCalls: true,
  turnId: true,
  createdAt: true,
} satisfies Prisma.ChatMessageSelect;

/** Appends a message and stamps the session's lastMessageAt, atomically. */
export async function appendChatMessage(
  scope: TenantScope,
  sessionId: string,
  rawInput: TAppendChatMessageInput,
  db: Db,
): Promise<ChatMessageDTO> {
  const input = parseInput(ZAppendChatMessageInput, rawInput);
  return db.$transaction(async (tx) => {
    const now = new Date();
    const { count } = await tx.session.updateMany({
      where: { tenantId: scope.tenantId, id: sessionId },
      data: { lastMessageAt: now },
    });
    if (count === 0) throw sessionNotFound(sessionId);
    return tx.chatMessage
      .create({
        data: {
          tenantId: scope.tenantId,
          sessionId,
          role: input.role,
          content: (input.content ?? null) as Prisma.InputJsonValue,
          toolCalls:
            input.toolCalls === undefined ? Prisma.DbNull : (input.toolCalls as Prisma.InputJsonValue),
          turnId: input.turnId ?? null,
          createdAt: now,
        },
        select: messageSelect,
      })
      .then((row) => ({ ...row, reverted: false }));
  });
}

/** Oldest first (conversation order); `afterId` continues after a known message. */
export async function listChatMessages(
  scope: TenantScope,
  sessionId: string,
  options: { limit?: number; afterId?: string } = {},
  db: DbClient,
): Promise<ChatMessageDTO[]> {
  const rows = await db.chatMessage.findMany({
    where: { tenantId: scope.tenantId, sessionId },
    select: messageSelect,
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
    take: pageSize(options.limit, 200),
    ...(options.afterId ? { cursor: { id: options.afterId }, skip: 1 } : {}),
  });
  // Reverted turns are few and a session's turns are indexed: one query for the page, not a join per row.
  const turnIds = [...new Set(rows.flatMap((row) => (row.turnId ? [row.turnId] : [])))];
  const reverted =
    turnIds.length === 0
      ? new Set<string>()
      : new Set(
          (
            await db.chatTurn.findMany({
              where: { tenantId: scope.tenantId, sessionId, id: { in: turnIds }, revertedAt: { not: null } },
              select: { id: true },
            })
          ).map((turn) => turn.id),
        );
  return rows.map((row) => ({ ...row, reverted: row.turnId !== null && reverted.has(row.turnId) }));
}

export async function deleteChatMessages(
  scope: TenantScope,
  sessionId: string,
  db: DbClient,
): Promise<number> {
  const { count } = await db.chatMessage.deleteMany({ where: { tenantId: scope.tenantId, sessionId } });
  return count;
}

export function sessionNotFound(sessionId: string): AppError {
  return new AppError("NOT_FOUND", `session ${sessionId} not found`, { userMessage: "Session not found." });
}

/**
 * Appends a turn's messages in order (strictly increasing `createdAt`, so conversation order survives
 * messages written in the same millisecond), optionally replacing the first `replace.count` stored messages
 * by `replace.stub` first (history compaction), and stamps lastMessageAt; all in one transaction.
 */
export async function appendChatMessages(
  scope: TenantScope,
  sessionId: string,
  rawInputs: TAppendChatMessageInput[],
  replace: { count: number; stub: TAppendChatMessageInput } | null = null,
  db: DbClient,
): Promise<number> {
  const inputs = rawInputs.map((raw) => parseInput(ZAppendChatMessageInput, raw));
  // Inside the caller's transaction when given one (a turn stores its messages with its outcome).
  return inTransaction(db, async (tx) => {
    const now = new Date();
    const { count } = await tx.session.updateMany({
      where: { tenantId: scope.tenantId, id: sessionId },
      data: { lastMessageAt: now },
    });
    if (count === 0) throw sessionNotFound(sessionId);
    const toRow = (input: z.output<typeof ZAppendChatMessageInput>, createdAt: Date) => ({
      tenantId: scope.tenantId,
      sessionId,
      role: input.role,
      content: (input.content ?? null) as Prisma.InputJsonValue,
      toolCalls: input.toolCalls === undefined ? Prisma.DbNull : (input.toolCalls as Prisma.InputJsonValue),
      turnId: input.turnId ?? null,
      createdAt,
    });
    if (replace && replace.count > 0) {
      const replaced = await tx.chatMessage.findMany({
        where: { tenantId: scope.tenantId, sessionId },
        select: { id: true, createdAt: true },
        orderBy: [{ createdAt: "asc" }, { id: "asc" }],
        take: replace.count,
      });
      await tx.chatMessage.deleteMany({ where: { id: { in: replaced.map((row) => row.id) } } });
      const stubAt = replaced[0]?.createdAt ?? now;
      await tx.chatMessage.create({ data: toRow(parseInput(ZAppendChatMessageInput, replace.stub), stubAt) });
    }
    const last = await tx.chatMessage.findFirst({
      where: { tenantId: scope.tenantId, sessionId },
      select: { createdAt: true },
      orderBy: [{ createdAt: "desc" }],
    });
    const start = Math.max(now.getTime(), (last?.createdAt.getTime() ?? 0) + 1);
    await tx.chatMessage.createMany({
      data: inputs.map((input, index) => toRow(input, new Date(start + index))),
    });
    return inputs.length;
  });
}
