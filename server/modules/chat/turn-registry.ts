import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import { AppError } from "@/server/shared/errors";

/**
 * One running turn per session. The registry keeps the local turns (their abort controllers) and asks a
 * `TurnLock` for the session, so with a shared lock a second `start` on ANOTHER API process gets the same
 * CONFLICT, and `cancel` reaches a turn running elsewhere.
 */

/**
 * The cross-process part. The in-memory implementation below serves one process (and tests); a Redis
 * implementation would use `SET turn:<sid> <owner> NX PX ttl` for `acquire`, a compare-and-set script for
 * `renew`/`release`, and a pub/sub channel `turn-cancel:<sid>` for `requestCancel`/`onCancelRequested`.
 */
export interface TurnLock {
  /** Takes the session's lock for `ttlMs`; false when another owner holds it. */
  acquire(sessionId: string, ownerId: string, ttlMs: number): Promise<boolean>;
  /** Extends a lock this owner holds; false when it was lost (expired and taken). */
  renew(sessionId: string, ownerId: string, ttlMs: number): Promise<boolean>;
  /** Releases the lock if this owner still holds it. */
  release(sessionId: string, ownerId: string): Promise<void>;
  /** Asks the holder of the session's lock, in any process, to cancel. False when nobody holds it. */
  requestCancel(sessionId: string): Promise<boolean>;
  /** The holder listens for cancel requests while its turn runs. Returns the unsubscribe function. */
  onCancelRequested(sessionId: string, listener: () => void): Promise<() => void>;
}

export class InMemoryTurnLock implements TurnLock {
  private readonly holders = new Map<string, { ownerId: string; expiresAt: number }>();
  private readonly cancels = new EventEmitter().setMaxListeners(0);

  acquire(sessionId: string, ownerId: string, ttlMs: number): Promise<boolean> {
    const holder = this.holders.get(sessionId);
    if (holder && holder.ownerId !== ownerId && holder.expiresAt > Date.now()) return Promise.resolve(false);
    this.holders.set(sessionId, { ownerId, expiresAt: Date.now() + ttlMs });
    return Promise.resolve(true);
  }

  renew(sessionId: string, ownerId: string, ttlMs: number): Promise<boolean> {
    const holder = this.holders.get(sessionId);
    if (holder?.ownerId !== ownerId) return Promise.resolve(false);
    holder.expiresAt = Date.now() + ttlMs;
    return Promise.resolve(true);
  }

  release(sessionId: string, ownerId: string): Promise<void> {
    if (this.holders.get(sessionId)?.ownerId === ownerId) this.holders.delete(sessionId);
    return Promise.resolve();
  }

  requestCancel(sessionId: string): Promise<boolean> {
    const holder = this.holders.get(sessionId);
    if (!holder || holder.expiresAt <= Date.now()) return Promise.resolve(false);
    this.cancels.emit(sessionId);
    return Promise.resolve(true);
  }

  onCancelRequested(sessionId: string, listener: () => void): Promise<() => void> {
    this.cancels.on(sessionId, listener);
    return Promise.resolve(() => void this.cancels.off(sessionId, listener));
  }
}

/** A turn that holds its session. Call `end()` exactly once when the turn is over (also after errors). */
export type RunningTurn = {
  readonly sessionId: string;
  /** Aborted by `cancel`, by a cancel request from another process, or when the lock is lost. */
  readonly signal: AbortSignal;
  end(): Promise<void>;
};

export type TurnRegistryOptions = {
  lock?: TurnLock;
  /** Lock lifetime; renewed every third of it while the turn runs, so a crashed process frees it soon. */
  lockTtlMs?: number;
};

export class TurnRegistry {
  private readonly lock: TurnLock;
  private readonly lockTtlMs: number;
  private readonly local = new Map<string, AbortController>();

  constructor(options: TurnRegistryOptions = {}) {
    this.lock = options.lock ?? new InMemoryTurnLock();
    this.lockTtlMs = options.lockTtlMs ?? 60_000;
  }

  /** Claims the session for a new turn. Rejects with AppError CONFLICT while another turn runs. */
  async start(sessionId: string): Promise<RunningTurn> {
    const conflict = () =>
      new AppError("CONFLICT", `A turn is already running in session ${sessionId}`, {
        userMessage: "A reply is already in progress in this session. Wait for it or cancel it first.",
        details: { sessionId },
      });
    if (this.local.has(sessionId)) throw conflict();
    const controller = new AbortController();
    this.local.set(sessionId, controller); // reserve before awaiting, so concurrent local starts conflict
    const ownerId = randomUUID();
    let acquired = false;
    try {
      acquired = await this.lock.acquire(sessionId, ownerId, this.lockTtlMs);
    } finally {
      if (!acquired) this.local.delete(sessionId);
    }
    if (!acquired) throw conflict();

    let unsubscribe: () => void;
    try {
      unsubscribe = await this.lock.onCancelRequested(sessionId, () =>
        controller.abort(abortReason("The turn was cancelled")),
      );
    } catch (error) {
      this.local.delete(sessionId);
      await this.lock.release(sessionId, ownerId);
      throw error;
    }
    const heartbeat = setInterval(
      () => {
        this.lock.renew(sessionId, ownerId, this.lockTtlMs).then(
          (held) => {
            if (!held) controller.abort(abortReason("The turn lost its session lock"));
          },
          () => undefined, // a failed renewal is retried on the next beat; the TTL covers the gap
        );
      },
      Math.max(1, Math.floor(this.lockTtlMs / 3)),
    );
    heartbeat.unref();

    let ended = false;
    return {
      sessionId,
      signal: controller.signal,
      end: async () => {
        if (ended) return;
        ended = true;
        clearInterval(heartbeat);
        unsubscribe();
        if (this.local.get(sessionId) === controller) this.local.delete(sessionId);
        await this.lock.release(sessionId, ownerId);
      },
    };
  }

  /** Starts a turn, runs `work` with its signal and always ends it. */
  async run<T>(sessionId: string, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const turn = await this.start(sessionId);
    try {
      return await work(turn.signal);
    } finally {
      await turn.end();
    }
  }

  /** Cancels the session's running turn wherever it runs. False when no turn was running. */
  async cancel(sessionId: string): Promise<boolean> {
    const controller = this.local.get(sessionId);
    if (controller) {
      controller.abort(abortReason("The turn was cancelled"));
      return true;
    }
    return this.lock.requestCancel(sessionId);
  }

  /** Whether a turn of this session runs in THIS process. */
  isRunningHere(sessionId: string): boolean {
    return this.local.has(sessionId);
  }
}

function abortReason(message: string): DOMException {
  return new DOMException(message, "AbortError");
}
