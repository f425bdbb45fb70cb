import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";
import { redisKey } from "@/server/redis";
import { type TChatTurnEvent, ZChatTurnEvent } from "@/server/agent/agent.schema";

/**
 * The events of each turn as it runs, so any tab (through any API replica) can re-attach to a running turn
 * and see it from where it is: a Redis stream per turn, `<prefix>:turn-events:<turnId>`, whose entry ids are
 * the events' sequence numbers (`0-<seq>`, from 1), bounded (MAXLEN) and expiring (a TTL renewed on each
 * write). The log is a view, not the record: the turn's outcome and messages are in Postgres
 * (chat-turn.data.ts), so a lost or expired log only costs the replay of a turn's intermediate events.
 */
export type SequencedTurnEvent = { seq: number; event: TChatTurnEvent };

export interface TurnEventLog {
  /** Appends in call order (fire and forget: a failed write is logged once, the turn goes on). */
  append(turnId: string, seq: number, event: TChatTurnEvent): void;
  /** The stored events with `seq >= fromSeq`, in order, at most `limit`. */
  read(turnId: string, fromSeq: number, limit?: number): Promise<SequencedTurnEvent[]>;
  /** Resolves on the next append to this turn in THIS process, or after `ms` (other replicas are polled). */
  waitForAppend(turnId: string, ms: number, signal?: AbortSignal): Promise<void>;
}

/** Events kept per turn: a very long turn's oldest events are dropped (its outcome is stored anyway). */
const TURN_LOG_MAX_EVENTS = 20_000;
/** How long a turn's log is kept after its last event. */
const TURN_LOG_TTL_SECONDS = 60 * 60;

export class RedisTurnEventLog implements TurnEventLog {
  private readonly appended = new EventEmitter().setMaxListeners(0);
  private warned = false;

  constructor(
    private readonly options: {
      redis: Redis;
      prefix: string;
      onWriteError?: (error: unknown) => void;
    },
  ) {}

  private key(turnId: string): string {
    return redisKey(this.options.prefix, "turn-events", turnId);
  }

  append(turnId: string, seq: number, event: TChatTurnEvent): void {
    const key = this.key(turnId);
    // One connection, commands in call order: the stream's ids are increasing without awaiting each write.
    this.options.redis
      .multi()
      .xadd(key, "MAXLEN", "~", TURN_LOG_MAX_EVENTS, `0-${seq}`, "e", JSON.stringify(event))
      .expire(key, TURN_LOG_TTL_SECONDS)
      .exec()
      .catch((error: unknown) => {
        if (this.warned) return;
        this.warned = true; // once per process: a Redis outage would otherwise log every text delta
        this.options.onWriteError?.(error);
      });
    this.appended.emit(turnId);
  }

  async read(turnId: string, fromSeq: number, limit = 500): Promise<SequencedTurnEvent[]> {
    const entries = await this.options.redis.xrange(
      this.key(turnId),
      `0-${Math.max(1, fromSeq)}`,
      "+",
      "COUNT",
      limit,
    );
    const events: SequencedTurnEvent[] = [];
    for (const [id, fields] of entries) {
      const seq = Number(id.split("-")[1]);
      const parsed = ZChatTurnEvent.safeParse(JSON.parse(fields[1] ?? "null"));
      if (parsed.success) events.push({ seq, event: parsed.data });
    }
    return events;
  }

  waitForAppend(turnId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return waitForEvent(this.appended, turnId, ms, signal);
  }
}

/** A log in this process' memory (unit tests, and a process without Redis): not shared between replicas. */
export class InMemoryTurnEventLog implements TurnEventLog {
  private readonly turns = new Map<string, SequencedTurnEvent[]>();
  private readonly appended = new EventEmitter().setMaxListeners(0);

  append(turnId: string, seq: number, event: TChatTurnEvent): void {
    const events = this.turns.get(turnId) ?? [];
    events.push({ seq, event });
    if (events.length > TURN_LOG_MAX_EVENTS) events.shift();
    this.turns.set(turnId, events);
    this.appended.emit(turnId);
  }

  read(turnId: string, fromSeq: number, limit = 500): Promise<SequencedTurnEvent[]> {
    const events = (this.turns.get(turnId) ?? []).filter((entry) => entry.seq >= fromSeq);
    return Promise.resolve(events.slice(0, limit));
  }

  waitForAppend(turnId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return waitForEvent(this.appended, turnId, ms, signal);
  }
}

/** Resolves at `name`'s next emit on `emitter`, after `ms`, or when `signal` aborts, whichever is first. */
export function waitForEvent(
  emitter: EventEmitter,
  name: string,
  ms: number,
  signal?: AbortSignal,
): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      emitter.off(name, done);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    emitter.once(name, done);
    signal?.addEventListener("abort", done, { once: true });
  });
}
