import { EventEmitter } from "node:events";
import { z } from "zod";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import type { StoredTurn, TurnHeader } from "./chat-turn.data";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { type SequencedTurnEvent, type TurnEventLog, waitForEvent } from "./turn-event-log";

/**
 * Re-attaching to turns: `attachTurn` replays a turn's stored events from a sequence number and follows it
 * live until its `done` (through any replica: the log is in Redis, the turn's state in Postgres);
 * `followSession` does that for every turn a session runs, one after the other (a second tab, a reload).
 * Following never affects the turn: only `chat.cancel` stops one.
 */
export const ZChatAttachRequest = z.object({
  sessionId: z.string().min(1).max(200),
  /** Default: the session's running turn (the stream ends at once, empty, when none runs). */
  turnId: z.string().min(1).max(200).optional(),
  /** The first sequence number wanted (default 1: the whole turn). */
  fromSeq: z.number().int().min(1).optional(),
});

/** What `chat.attach` streams: a turn's events with their sequence numbers (a keepalive repeats the last). */
export type TAttachedTurnEvent = { turnId: string; seq: number; event: TChatTurnEvent };

/** What `chat.follow` streams: each turn the session runs (announced, then its events), and keepalives. */
export type TSessionFollowEvent =
  | { type: "turn"; turnId: string; userMessage: string; startedAt: Date; idempotencyKey: string | null }
  | { type: "event"; turnId: string; seq: number; event: TChatTurnEvent }
  | { type: "keepalive" };

export type TurnAttachDeps = {
  log: TurnEventLog;
  getTurn(scope: TenantScope, turnId: string): Promise<StoredTurn | null>;
  getTurnHeader(scope: TenantScope, turnId: string): Promise<TurnHeader | null>;
  /** The session's running turn id (null when idle); NOT_FOUND for an unknown session. */
  runningTurnOf(scope: TenantScope, sessionId: string): Promise<string | null>;
  /** Interrupts the turn when its process is dead (turn-registry.ts); true when it did. */
  interruptIfDead(scope: TenantScope, turn: StoredTurn): Promise<boolean>;
  /** How often the log is read when nothing was appended in this process (the turn runs elsewhere). */
  pollMs?: number;
  /** How often the turn's row is read while its log is quiet (its end, its process' death). */
  statusEveryMs?: number;
  /** How often an idle session is looked at for a turn started elsewhere. */
  sessionPollMs?: number;
};

const KEEPALIVE_MS = 15_000;
/** A turn stored as ended whose `done` is not in the log this long after: the log lost it (expired, Redis). */
const LOG_GRACE_MS = 1_000;

/** Local turn starts, so a follower in this process hears of them at once (others poll). */
const turnStarts = new EventEmitter().setMaxListeners(0);

export function announceTurnStarted(sessionId: string): void {
  turnStarts.emit(sessionId);
}

function waitForTurnStart(sessionId: string, ms: number, signal?: AbortSignal): Promise<void> {
  return waitForEvent(turnStarts, sessionId, ms, signal);
}

/** The end of a turn whose log does not hold it: from its stored outcome. */
function fromOutcome(turn: StoredTurn, replayText: boolean): TChatTurnEvent[] {
  const outcome = turn.outcome;
  const status = turn.status === "RUNNING" ? "interrupted" : turn.status.toLowerCase();
  const events: TChatTurnEvent[] = [];
  if (outcome?.error) events.push({ type: "error", ...outcome.error });
  if (replayText && outcome?.text) events.push({ type: "text-delta", text: outcome.text });
  events.push(
    outcome?.done ?? {
      type: "done",
      status: status as Extract<TChatTurnEvent, { type: "done" }>["status"],
      finishReason: null,
      usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
      steps: 0,
    },
  );
  return events;
}

export async function* attachTurn(
  deps: TurnAttachDeps,
  scope: TenantScope,
  turnId: string,
  fromSeq = 1,
  signal?: AbortSignal,
): AsyncGenerator<SequencedTurnEvent, void, undefined> {
  let turn = await deps.getTurn(scope, turnId);
  if (!turn) throw new AppError("NOT_FOUND", `turn ${turnId} not found`, { userMessage: "Turn not found." });
  let next = Math.max(1, fromSeq);
  let delivered = false;
  let lastYieldAt = Date.now();
  let statusAt = Date.now();
  let endedSeenAt: number | null = turn.status === "RUNNING" ? null : Date.now();
  while (!signal?.aborted) {
    const batch = await deps.log.read(turnId, next).catch(() => [] as SequencedTurnEvent[]);
    for (const entry of batch) {
      yield entry;
      next = entry.seq + 1;
      delivered = true;
      lastYieldAt = Date.now();
      if (entry.event.type === "done") return;
    }
    if (batch.length > 0) continue;
    const now = Date.now();
    if (endedSeenAt !== null && now - endedSeenAt >= LOG_GRACE_MS) {
      for (const event of fromOutcome(turn, !delivered && fromSeq <= 1)) yield { seq: next, event };
      return;
    }
    if (endedSeenAt === null && now - statusAt >= (deps.statusEveryMs ?? 1_000)) {
      statusAt = now;
      await deps.interruptIfDead(scope, turn);
      turn = (await deps.getTurn(scope, turnId)) ?? turn;
      if (turn.status !== "RUNNING") endedSeenAt = Date.now();
    }
    if (Date.now() - lastYieldAt >= KEEPALIVE_MS) {
      lastYieldAt = Date.now();
      yield { seq: next - 1, event: { type: "keepalive" } };
    }
    await deps.log.waitForAppend(turnId, deps.pollMs ?? 200, signal);
  }
}

export async function* followSession(
  deps: TurnAttachDeps,
  scope: TenantScope,
  sessionId: string,
  signal?: AbortSignal,
): AsyncGenerator<TSessionFollowEvent, void, undefined> {
  let lastTurnId: string | null = null;
  let lastYieldAt = Date.now();
  while (!signal?.aborted) {
    const running = await deps.runningTurnOf(scope, sessionId);
    if (running !== null && running !== lastTurnId) {
      lastTurnId = running;
      const header = await deps.getTurnHeader(scope, running);
      if (!header) continue;
      const { userMessage, startedAt, idempotencyKey } = header;
      yield { type: "turn", turnId: running, userMessage, startedAt, idempotencyKey };
      for await (const entry of attachTurn(deps, scope, running, 1, signal)) {
        yield { type: "event", turnId: running, ...entry };
      }
      lastYieldAt = Date.now();
      continue;
    }
    if (Date.now() - lastYieldAt >= KEEPALIVE_MS) {
      lastYieldAt = Date.now();
      yield { type: "keepalive" };
    }
    await waitForTurnStart(sessionId, deps.sessionPollMs ?? 1_000, signal);
  }
}
