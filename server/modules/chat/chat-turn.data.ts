import { type Prisma } from "@/generated/prisma/client";
import type { TenantScope } from "@/server/auth/scope";
import { type Db, type DbClient } from "@/server/db";
import { appendChatMessages } from "@/server/modules/session/session.data";
import type { TAppendChatMessageInput } from "@/server/modules/session/session.types";
import { AppError } from "@/server/shared/errors";
import { sanitizeStrings } from "@/server/shared/unsafe-strings";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import type { ChatTurnSummaryDTO } from "./chat.schema";

/**
 * The turns of a session in Postgres: THE one-turn-per-session claim across API processes (Redis only
 * carries cancel requests). A turn row names its owner process and carries a heartbeat; the session row
 * points at its running turn (`running_turn_id`). Claims lock the session row, so two processes can never
 * both see it free. A claim whose heartbeat is older than the turn TTL, or whose owner process is known
 * dead, is released as INTERRUPTED: the user's message and a marker are stored, the session says so.
 */

export type TurnOutcome = {
  done: Extract<TChatTurnEvent, { type: "done" }>;
  /** The assistant's text of the turn (every text delta, joined). */
  text: string;
  error: {
    code: Extract<TChatTurnEvent, { type: "error" }>["code"];
    message: string;
    retryable: boolean;
  } | null;
};

export type StoredTurn = {
  id: string;
  sessionId: string;
  status: "RUNNING" | "COMPLETED" | "CANCELLED" | "FAILED" | "INTERRUPTED";
  ownerId: string;
  heartbeatAt: Date;
  outcome: TurnOutcome | null;
};

export type ClaimResult =
  /** This send now holds the session. */
  | { kind: "claimed"; turn: StoredTurn }
  /** A send with the same idempotency key came first: running, or ended with its outcome. */
  | { kind: "same-key"; turn: StoredTurn }
  /** Another turn of the session runs and its heartbeat is fresh. */
  | { kind: "busy"; turn: StoredTurn };

/** What an interrupted turn stores after the user's message (and what its `done` reports). */
export const INTERRUPTED_MARKER =
  "[This reply was interrupted: the server process running it stopped before it finished. Tools it " +
  "started may have run; what they did is in the workspace. Send the message again to continue.]";

const INTERRUPTED_OUTCOME: TurnOutcome = {
  done: {
    type: "done",
    status: "interrupted",
    finishReason: null,
    usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
    steps: 0,
  },
  text: "",
  error: {
    code: "UNAVAILABLE",
    message:
      "The reply was interrupted because the server running it stopped. Send the message again to continue.",
    retryable: false,
  },
};

const turnSelect = {
  id: true,
  sessionId: true,
  status: true,
  ownerId: true,
  heartbeatAt: true,
  outcome: true,
} satisfies Prisma.ChatTurnSelect;

type TurnRow = Prisma.ChatTurnGetPayload<{ select: typeof turnSelect }>;

const toStoredTurn = (row: TurnRow): StoredTurn => ({ ...row, outcome: row.outcome as TurnOutcome | null });

async function lockSession(tx: Prisma.TransactionClient, scope: TenantScope, sessionId: string) {
  const [row] = await tx.$queryRaw<{ running_turn_id: string | null }[]>`
    SELECT running_turn_id FROM sessions WHERE tenant_id = ${scope.tenantId} AND id = ${sessionId} FOR UPDATE`;
  if (!row) {
    throw new AppError("NOT_FOUND", `session ${sessionId} not found`, { userMessage: "Session not found." });
  }
  return row;
}

/**
 * Under the session's row lock: the turn of this idempotency key if it exists (`same-key`), else the running
 * turn (`busy`, however stale: whether its owner is dead is the caller's to decide, with the process
 * liveness this module does not have, and then `interruptTurn`), else a new RUNNING turn owned by
 * `ownerId`, the session RUNNING and pointing at it.
 */
export async function claimTurn(
  scope: TenantScope,
  input: {
    sessionId: string;
    ownerId: string;
    idempotencyKey: string | null;
    userMessage: string;
  },
  db: Db,
): Promise<ClaimResult> {
  return db.$transaction(async (tx) => {
    const session = await lockSession(tx, scope, input.sessionId);
    if (input.idempotencyKey !== null) {
      const same = await tx.chatTurn.findUnique({
        where: {
          sessionId_idempotencyKey: { sessionId: input.sessionId, idempotencyKey: input.idempotencyKey },
        },
        select: turnSelect,
      });
      if (same) return { kind: "same-key", turn: toStoredTurn(same) };
    }
    if (session.running_turn_id !== null) {
      const current = await tx.chatTurn.findUnique({
        where: { id: session.running_turn_id },
        select: turnSelect,
      });
      if (current?.status === "RUNNING") return { kind: "busy", turn: toStoredTurn(current) };
    }
    const created = await tx.chatTurn.create({
      data: {
        tenantId: scope.tenantId,
        sessionId: input.sessionId,
        idempotencyKey: input.idempotencyKey,
        ownerId: input.ownerId,
        // A team member's message is a model's text: not checked at a transport (see finishTurn).
        userMessage: sanitizeStrings(input.userMessage),
      },
      select: turnSelect,
    });
    await tx.session.update({
      where: { id: input.sessionId },
      data: { runningTurnId: created.id, status: "RUNNING" },
    });
    return { kind: "claimed", turn: toStoredTurn(created) };
  });
}

/** Renews the claim; false when the turn is no longer this owner's RUNNING turn (it was interrupted). */
export async function heartbeatTurn(turnId: string, ownerId: string, db: Db): Promise<boolean> {
  const { count } = await db.chatTurn.updateMany({
    where: { id: turnId, ownerId, status: "RUNNING" },
    data: { heartbeatAt: new Date() },
  });
  return count === 1;
}

export async function getTurn(scope: TenantScope, turnId: string, db: Db): Promise<StoredTurn | null> {
  const row = await db.chatTurn.findFirst({
    where: { tenantId: scope.tenantId, id: turnId },
    select: turnSelect,
  });
  return row ? toStoredTurn(row) : null;
}

const STATUS_OF_DONE = {
  completed: "COMPLETED",
  cancelled: "CANCELLED",
  failed: "FAILED",
  interrupted: "INTERRUPTED",
} as const;

/**
 * Ends the turn in one transaction: its outcome, its messages (user message first), the session's status,
 * and the session's claim. When another process interrupted it meanwhile (its heartbeat could not be
 * written, e.g. during a database outage), the user's message and the marker are stored already: the
 * turn's own messages follow them, and the interruption stands. Returns whether it was interrupted.
 *
 * Everything it writes is first made storable, here, in one place: tool outputs (a `cat` of a binary
 * file), tool inputs, the model's text and reasoning, error messages may hold NUL bytes or unpaired
 * surrogates, which Postgres rejects (22P05, 22021) and would fail the whole turn with; they become U+FFFD,
 * nested JSON included. (The model was told already when its tool results were altered: tool-output.ts.)
 */
export async function finishTurn(
  scope: TenantScope,
  sessionId: string,
  turnId: string,
  unsafeResult: {
    outcome: TurnOutcome;
    messages: TAppendChatMessageInput[];
    compaction: { count: number; stub: TAppendChatMessageInput } | null;
    sessionStatus: "IDLE" | "ERROR";
  },
  db: Db,
): Promise<{ interrupted: boolean }> {
  const sanitized = sanitizeStrings(unsafeResult);
  // Each message carries its turn: a checkpoint's transcript, a revert's marks and a fork's copy follow it.
  const result = {
    ...sanitized,
    messages: sanitized.messages.map((message) => ({ ...message, turnId })),
    compaction: sanitized.compaction
      ? { ...sanitized.compaction, stub: { ...sanitized.compaction.stub, turnId } }
      : null,
  };
  return db.$transaction(async (tx) => {
    await lockSession(tx, scope, sessionId);
    const { count } = await tx.chatTurn.updateMany({
      where: { tenantId: scope.tenantId, id: turnId, status: "RUNNING" },
      data: {
        status: STATUS_OF_DONE[result.outcome.done.status],
        outcome: result.outcome,
        endedAt: new Date(),
      },
    });
    if (count === 0) {
      await appendChatMessages(scope, sessionId, result.messages.slice(1), null, tx);
      return { interrupted: true };
    }
    await appendChatMessages(scope, sessionId, result.messages, result.compaction, tx);
    await tx.session.updateMany({
      where: { id: sessionId, runningTurnId: turnId },
      data: { runningTurnId: null, status: result.sessionStatus },
    });
    return { interrupted: false };
  });
}

/** Interrupts the turn if it is still RUNNING (any process may: the update is conditional). */
export async function interruptTurn(
  scope: TenantScope,
  sessionId: string,
  turnId: string,
  db: Db,
): Promise<boolean> {
  return db.$transaction(async (tx) => {
    await lockSession(tx, scope, sessionId);
    return interruptLocked(tx, scope, sessionId, turnId);
  });
}

async function interruptLocked(
  tx: Prisma.TransactionClient,
  scope: TenantScope,
  sessionId: string,
  turnId: string,
): Promise<boolean> {
  const turn = await tx.chatTurn.findFirst({
    where: { tenantId: scope.tenantId, id: turnId, status: "RUNNING" },
    select: { userMessage: true },
  });
  if (!turn) return false;
  await tx.chatTurn.update({
    where: { id: turnId },
    data: {
      status: "INTERRUPTED",
      outcome: INTERRUPTED_OUTCOME,
      endedAt: new Date(),
    },
  });
  await appendChatMessages(
    scope,
    sessionId,
    [
      { role: "user", content: turn.userMessage },
      { role: "assistant", content: [{ type: "text", text: INTERRUPTED_MARKER }] },
    ],
    null,
    tx,
  );
  await tx.session.updateMany({
    where: { id: sessionId, runningTurnId: turnId },
    data: { runningTurnId: null, status: "INTERRUPTED" },
  });
  return true;
}

/** Every RUNNING turn (any tenant): what the dead-holder reaper checks. Bounded per pass. */
export async function listRunningTurns(
  limit = 500,
  db: DbClient,
): Promise<Array<{ id: string; tenantId: string; sessionId: string; ownerId: string; heartbeatAt: Date }>> {
  return db.chatTurn.findMany({
    where: { status: "RUNNING" },
    select: { id: true, tenantId: true, sessionId: true, ownerId: true, heartbeatAt: true },
    orderBy: { heartbeatAt: "asc" },
    take: limit,
  });
}

/**
 * The part of a turn another tab needs to show it: whose message it answers, since when, and the send's
 * key (the tab that sent it recognises its own turn by it).
 */
export type TurnHeader = { id: string; userMessage: string; startedAt: Date; idempotencyKey: string | null };

export async function getTurnHeader(
  scope: TenantScope,
  turnId: string,
  db: DbClient,
): Promise<TurnHeader | null> {
  return db.chatTurn.findFirst({
    where: { tenantId: scope.tenantId, id: turnId },
    select: { id: true, userMessage: true, startedAt: true, idempotencyKey: true },
  });
}

/** A user's message shown with a turn that stored none of its own messages (cut to keep the list small). */
const TURN_MESSAGE_PREVIEW_CHARS = 10_000;

/**
 * The session's most recent turns, oldest first: their status and reason, so the history can say which
 * replies failed, were cancelled or were interrupted (chat_messages holds only what was said).
 */
export async function listTurnSummaries(
  scope: TenantScope,
  sessionId: string,
  limit = 200,
  db: DbClient,
): Promise<ChatTurnSummaryDTO[]> {
  const rows = await db.chatTurn.findMany({
    where: { tenantId: scope.tenantId, sessionId },
    select: { id: true, status: true, startedAt: true, endedAt: true, outcome: true, userMessage: true },
    orderBy: [{ startedAt: "desc" }, { id: "desc" }],
    take: limit,
  });
  return rows.reverse().map((row) => {
    const outcome = row.outcome as TurnOutcome | null;
    const ok = row.status === "COMPLETED" || row.status === "RUNNING";
    return {
      id: row.id,
      status: row.status,
      startedAt: row.startedAt,
      endedAt: row.endedAt,
      error: outcome?.error ? { code: outcome.error.code, message: outcome.error.message } : null,
      userMessage: ok ? null : row.userMessage.slice(0, TURN_MESSAGE_PREVIEW_CHARS),
    };
  });
}

/** The session's running turn id, null when idle; NOT_FOUND for a session not in the scope's tenant. */
export async function getRunningTurnId(
  scope: TenantScope,
  sessionId: string,
  db: DbClient,
): Promise<string | null> {
  const row = await db.session.findFirst({
    where: { tenantId: scope.tenantId, id: sessionId },
    select: { runningTurnId: true },
  });
  if (!row)
    throw new AppError("NOT_FOUND", `session ${sessionId} not found`, { userMessage: "Session not found." });
  return row.runningTurnId;
}
