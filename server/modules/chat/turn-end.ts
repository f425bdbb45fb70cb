import type { Db } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import type { Logger } from "@/server/logger";
import { isConnectionError } from "@/server/shared/errors";
import type { TurnResult } from "@/server/agent/agent-loop";
import { finishTurn, type TurnOutcome } from "./chat-turn.data";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { safeErrorEvent } from "@/server/agent/safe-errors";
import { toStoredMessage } from "@/server/agent/stored-messages";
import type { RunningTurn } from "./turn-registry";

/**
 * The end of a chat turn in Postgres, as the chat service stores it: the turn itself, and what is stored
 * when that fails. Only a lost connection is an outage (retried, and reported as UNAVAILABLE); the
 * database refusing the data, or a session deleted meanwhile, is not, and is never reported as one.
 */
export type TurnEndDeps = {
  log: Pick<Logger, "warn" | "error">;
  /** Backoff of the final write when the database connection is lost. */
  retryDelaysMs?: readonly number[] | undefined;
};

type DoneEvent = Extract<TChatTurnEvent, { type: "done" }>;
type ErrorEvent = Extract<TChatTurnEvent, { type: "error" }>;

/**
 * Stores the turn's end (outcome, messages, session status) in one transaction, retried with backoff
 * so a short database outage does not lose what ran. When it still fails the claim is left to go stale:
 * another process then records the turn as interrupted (the user's message and the marker). Only a lost
 * connection or a transaction conflict is retried: any other failure (the data refused, the session gone)
 * would fail the same way again, and is thrown at once.
 */
export async function storeTurnEnd(
  deps: TurnEndDeps,
  scope: TenantScope,
  turn: RunningTurn,
  outcome: TurnOutcome,
  result: TurnResult | null,
  db: Db,
): Promise<void> {
  const sessionStatus = outcome.done.status === "failed" ? "ERROR" : "IDLE";
  const messages = result ? result.newMessages.map(toStoredMessage) : [];
  const compaction = result?.compaction
    ? { count: result.compaction.replacedCount, stub: toStoredMessage(result.compaction.stub) }
    : null;
  const delays = deps.retryDelaysMs ?? [250, 1_000, 2_000, 4_000, 8_000];
  for (let attempt = 0; ; attempt++) {
    try {
      await finishTurn(
        scope,
        turn.sessionId,
        turn.turnId,
        { outcome, messages, compaction, sessionStatus },
        db,
      );
      return;
    } catch (error) {
      const delay = delays[attempt];
      if (delay === undefined || !(isConnectionError(error) || isTransactionConflict(error))) throw error;
      deps.log.warn(
        { err: error, sessionId: turn.sessionId, attempt },
        "storing a turn's end failed; retrying",
      );
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/**
 * After `storeTurnEnd` failed with `thrown`: the error event the client gets. Unless the database is
 * unreachable, the turn is stored as failed with the user's message and a marker in place of its reply,
 * so the session is usable at once instead of waiting for its claim to go stale.
 */
export async function storeUnsavedTurn(
  deps: TurnEndDeps,
  scope: TenantScope,
  turn: RunningTurn,
  userMessage: string,
  done: DoneEvent,
  thrown: unknown,
  db: Db,
): Promise<ErrorEvent> {
  if (isConnectionError(thrown)) {
    return {
      type: "error",
      code: "UNAVAILABLE",
      message: "The reply could not be saved because the database is unavailable. Reload the session later.",
      retryable: false,
    };
  }
  const masked = safeErrorEvent(thrown);
  const error = {
    code: masked.code,
    message: `The reply could not be saved: ${masked.message}`,
    retryable: false,
  };
  await finishTurn(
    scope,
    turn.sessionId,
    turn.turnId,
    {
      outcome: { done: { ...done, status: "failed" }, text: "", error },
      messages: [
        { role: "user", content: userMessage },
        { role: "assistant", content: [{ type: "text", text: `[${error.message}]` }] },
      ],
      compaction: null,
      sessionStatus: "ERROR",
    },
    db,
  ).catch((again: unknown) =>
    deps.log.error({ err: again, sessionId: turn.sessionId }, "could not store a chat turn as failed"),
  );
  return { type: "error", ...error };
}

/**
 * A serialization failure or deadlock (SQLSTATE 40001 / 40P01, Prisma P2034) or a transaction that
 * expired (P2028): worth another attempt, but no outage. Duck-typed like isConnectionError.
 */
function isTransactionConflict(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return false;
  const error = value as { code?: unknown; meta?: { driverAdapterError?: { cause?: { kind?: unknown } } } };
  if (error.code === "P2034" || error.code === "P2028" || error.code === "40001" || error.code === "40P01")
    return true;
  return error.meta?.driverAdapterError?.cause?.kind === "TransactionWriteConflict";
}
