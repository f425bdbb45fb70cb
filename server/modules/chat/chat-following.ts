import type { Db } from "@/server/db";
import type { z } from "zod";
import type { TenantScope } from "@/server/auth/scope";
import type { Logger } from "@/server/logger";
import { getSession } from "@/server/modules/session/session.data";
import { builtChangeFeed } from "@/server/modules/live/change-feed";
import { AppError } from "@/server/shared/errors";
import { parseInput } from "@/server/shared/parse-input";
import {
  getRunningTurnId,
  getTurn,
  getTurnHeader,
  listTurnSummaries,
  type StoredTurn,
} from "./chat-turn.data";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { EventChannel } from "@/server/agent/event-channel";
import { safeErrorEvent } from "@/server/agent/safe-errors";
import {
  announceTurnStarted,
  attachTurn,
  followSession,
  type TAttachedTurnEvent,
  type TSessionFollowEvent,
  type TurnAttachDeps,
  ZChatAttachRequest,
} from "./turn-attach";
import type { TurnEventLog } from "./turn-event-log";
import type { TurnRegistry } from "./turn-registry";

/** How often an idle followed session is looked at when the change feed wakes its follower on a start. */
const IDLE_BACKSTOP_MS = 5_000;

/**
 * The reading side of the chat service: turns seen again from their event logs (`attach`, and a resent
 * `send` with a known key), a session's turns as they run (`follow`), and how each turn ended (`turns`).
 * Reading never affects a turn. Each use case is a function of the same `TurnAttachDeps`
 * (`followingDeps` builds them once per service).
 */
export function followingDeps(deps: { log: TurnEventLog; registry: TurnRegistry; db: Db }): TurnAttachDeps {
  const { db } = deps;
  return {
    log: deps.log,
    getTurn: (scope, turnId) => getTurn(scope, turnId, db),
    getTurnHeader: (scope, turnId) => getTurnHeader(scope, turnId, db),
    runningTurnOf: (scope, sessionId) => getRunningTurnId(scope, sessionId, db),
    interruptIfDead: (scope, turn) => deps.registry.interruptIfDead(scope, turn),
  };
}

/** The stream of a send whose key the session has seen: that turn, replayed from its log to its end. */
export function replayTurn(
  deps: TurnAttachDeps,
  logger: Pick<Logger, "error">,
  scope: TenantScope,
  turn: StoredTurn,
  signal: AbortSignal | undefined,
): AsyncIterable<TChatTurnEvent> {
  const channel = new EventChannel<TChatTurnEvent>();
  void (async () => {
    try {
      for await (const { event } of attachTurn(deps, scope, turn.id, 1, signal)) channel.push(event);
    } catch (thrown) {
      logger.error({ err: thrown, sessionId: turn.sessionId }, "reporting a turn's outcome failed");
      channel.push(safeErrorEvent(thrown));
    } finally {
      channel.close();
    }
  })();
  signal?.addEventListener("abort", () => channel.close(), { once: true });
  return channel;
}

/**
 * `chat.attach`: a turn's events from `fromSeq` (default: all), then live until its `done`: the session's
 * running turn unless `turnId` names one (an ended turn replays what its log still holds, then its stored
 * end). The stream ends at once when no turn runs.
 */
export async function attachToTurn(
  deps: TurnAttachDeps,
  scope: TenantScope,
  raw: z.input<typeof ZChatAttachRequest>,
  signal: AbortSignal | undefined,
  db: Db,
): Promise<AsyncIterable<TAttachedTurnEvent>> {
  const input = parseInput(ZChatAttachRequest, raw);
  const session = await getSession(scope, input.sessionId, db);
  const turnId = input.turnId ?? (await getRunningTurnId(scope, session.id, db));
  if (turnId && (await getTurn(scope, turnId, db))?.sessionId !== session.id) {
    throw new AppError("NOT_FOUND", `turn ${turnId} not found`, { userMessage: "Turn not found." });
  }
  const events = turnId ? attachTurn(deps, scope, turnId, input.fromSeq ?? 1, signal) : null;
  return (async function* () {
    if (events && turnId) for await (const entry of events) yield { turnId, ...entry };
  })();
}

/** `chat.follow`: every turn of the session as it runs (the running one first, replayed), until `signal` aborts. */
export async function followTurns(
  deps: TurnAttachDeps,
  scope: TenantScope,
  sessionId: string,
  signal: AbortSignal | undefined,
  db: Db,
): Promise<AsyncIterable<TSessionFollowEvent>> {
  const session = await getSession(scope, sessionId, db);
  // A turn started on another replica is announced on the tenant's change feed (Redis pub/sub): it
  // wakes this follower at once, as a local start does, so the session is looked at only on a change
  // (and on a slow backstop, since pub/sub drops what a disconnected subscriber misses).
  const stopListening = await builtChangeFeed()
    ?.listen(scope.tenantId, (change) => {
      if (change.topic === "session" && change.id === session.id) announceTurnStarted(session.id);
    })
    .catch(() => undefined);
  const followed = followSession(
    { ...deps, sessionPollMs: stopListening ? IDLE_BACKSTOP_MS : undefined },
    scope,
    session.id,
    signal,
  );
  return (async function* () {
    try {
      yield* followed;
    } finally {
      stopListening?.();
    }
  })();
}

/** `chat.turns`: the session's recent turns with their status and, for a failed or interrupted one, why. */
export async function listTurns(scope: TenantScope, sessionId: string, db: Db) {
  const session = await getSession(scope, sessionId, db);
  return listTurnSummaries(scope, session.id, undefined, db);
}
