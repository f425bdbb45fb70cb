import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import type { ClaimResult, StoredTurn } from "./chat-turn.data";

/**
 * One running turn per session, across processes, and every send at most once. The claim lives in
 * Postgres (`TurnClaims`, chat-turn.data.ts): a turn row with its owner process and a heartbeat, which the
 * session row points at. This registry keeps the local turns (their abort controllers), beats their
 * claims, and reaches a turn running elsewhere through a `CancelBus` (Redis pub/sub: it carries requests
 * only, so losing Redis's data loses no turn and frees no session). A claim whose owner process is known
 * dead (`Liveness`, the process heartbeats) or whose heartbeat is older than the TTL is interrupted and
 * the session taken over.
 */

export interface TurnClaims {
  claim(
    scope: TenantScope,
    input: {
      sessionId: string;
      ownerId: string;
      idempotencyKey: string | null;
      userMessage: string;
    },
  ): Promise<ClaimResult>;
  heartbeat(turnId: string, ownerId: string): Promise<boolean>;
  interrupt(scope: TenantScope, sessionId: string, turnId: string): Promise<boolean>;
  get(scope: TenantScope, turnId: string): Promise<StoredTurn | null>;
}

/** Cancel requests to whichever process runs a session's turn. */
export interface CancelBus {
  /** True when a process running the session's turn received it. */
  requestCancel(sessionId: string): Promise<boolean>;
  /** The runner listens while its turn runs. Returns the unsubscribe function. */
  onCancelRequested(sessionId: string, listener: () => void): Promise<() => void>;
}

/** This process' id (its heartbeat) and which other holders are known alive or dead. */
export interface Liveness {
  readonly ownerId: string;
  /**
   * Which of `ownerIds` are known alive (beating) and which known dead; an id in neither is unknown (Redis
   * lost its data, or is down).
   */
  classify(ownerIds: readonly string[]): Promise<{ alive: readonly string[]; dead: readonly string[] }>;
}

const UNKNOWN: { alive: readonly string[]; dead: readonly string[] } = { alive: [], dead: [] };

export class InMemoryCancelBus implements CancelBus {
  private readonly cancels = new EventEmitter().setMaxListeners(0);

  requestCancel(sessionId: string): Promise<boolean> {
    return Promise.resolve(this.cancels.emit(sessionId));
  }

  onCancelRequested(sessionId: string, listener: () => void): Promise<() => void> {
    this.cancels.on(sessionId, listener);
    return Promise.resolve(() => void this.cancels.off(sessionId, listener));
  }
}

/** A turn that holds its session. Call `end()` exactly once when the turn is over (also after errors). */
export type RunningTurn = {
  readonly sessionId: string;
  readonly turnId: string;
  /** Aborted by `cancel`, by a cancel request from another process, or when the claim is lost. */
  readonly signal: AbortSignal;
  end(): Promise<void>;
};

export type TurnStart =
  | { kind: "started"; turn: RunningTurn }
  /** A send with the same idempotency key exists: running (await its outcome) or ended. */
  | { kind: "existing"; turn: StoredTurn };

export type TurnRegistryOptions = {
  claims: TurnClaims;
  cancelBus?: CancelBus;
  liveness?: Liveness;
  /** A claim not renewed for this long is dead; renewed every third of it while the turn runs. */
  turnTtlMs?: number;
  /** How often `awaitOutcome` looks at a turn running elsewhere. */
  pollMs?: number;
};

export class TurnRegistry {
  private readonly claims: TurnClaims;
  private readonly cancelBus: CancelBus;
  private readonly liveness: Liveness;
  private readonly turnTtlMs: number;
  private readonly pollMs: number;
  private readonly local = new Map<string, { controller: AbortController; turnId: string }>();

  constructor(options: TurnRegistryOptions) {
    this.claims = options.claims;
    this.cancelBus = options.cancelBus ?? new InMemoryCancelBus();
    this.liveness = options.liveness ?? { ownerId: randomUUID(), classify: () => Promise.resolve(UNKNOWN) };
    this.turnTtlMs = options.turnTtlMs ?? 60_000;
    this.pollMs = options.pollMs ?? 250;
  }

  get ownerId(): string {
    return this.liveness.ownerId;
  }

  /**
   * Claims the session for a new turn, or finds the send with the same idempotency key. Rejects with
   * AppError CONFLICT while another (live) turn runs.
   */
  async start(
    scope: TenantScope,
    request: { sessionId: string; idempotencyKey: string | null; userMessage: string },
  ): Promise<TurnStart> {
    const { sessionId } = request;
    for (let attempt = 0; attempt < 3; attempt++) {
      const claimed = await this.claims.claim(scope, { ...request, ownerId: this.ownerId });
      if (claimed.kind === "claimed") return { kind: "started", turn: await this.track(claimed.turn) };
      const running = claimed.turn;
      if (claimed.kind === "same-key" && running.status !== "RUNNING")
        return { kind: "existing", turn: running };
      if (!(await this.isDead(running))) {
        if (claimed.kind === "same-key") return { kind: "existing", turn: running };
        throw conflict(sessionId);
      }
      // Its process is gone: the turn is interrupted (stored as such), then claimed again.
      await this.claims.interrupt(scope, sessionId, running.id);
    }
    throw conflict(sessionId);
  }

  /**
   * Waits until the turn (running in another process, or in this one) has ended and returns it; a turn
   * whose process died meanwhile is interrupted first. Null when `signal` aborts first.
   */
  async awaitOutcome(scope: TenantScope, turn: StoredTurn, signal?: AbortSignal): Promise<StoredTurn | null> {
    let current: StoredTurn | null = turn;
    while (current?.status === "RUNNING") {
      if (signal?.aborted) return null;
      if (await this.isDead(current)) {
        await this.claims.interrupt(scope, current.sessionId, current.id);
      } else {
        await new Promise((resolve) => setTimeout(resolve, this.pollMs));
      }
      current = await this.claims.get(scope, turn.id);
    }
    return current;
  }

  /** Interrupts the turn (stored as such) when its process is gone; true when it did. */
  async interruptIfDead(scope: TenantScope, turn: StoredTurn): Promise<boolean> {
    if (!(await this.isDead(turn))) return false;
    return this.claims.interrupt(scope, turn.sessionId, turn.id);
  }

  /**
   * This process' own claim is alive exactly while it runs the turn. Another's is dead when its process is
   * known dead, or when its heartbeat is stale and its process is not known alive: a live process whose
   * claim renewals wait (a saturated connection pool) still stores its turn's end, and interrupting the
   * turn under it stored it twice.
   */
  private async isDead(turn: StoredTurn): Promise<boolean> {
    if (turn.status !== "RUNNING") return false;
    if (turn.ownerId === this.ownerId) return this.local.get(turn.sessionId)?.turnId !== turn.id;
    const { alive, dead } = await this.liveness.classify([turn.ownerId]).catch(() => UNKNOWN);
    if (dead.includes(turn.ownerId)) return true;
    return turn.heartbeatAt.getTime() < Date.now() - this.turnTtlMs && !alive.includes(turn.ownerId);
  }

  private async track(claimed: StoredTurn): Promise<RunningTurn> {
    const { sessionId, id: turnId } = claimed;
    const controller = new AbortController();
    this.local.set(sessionId, { controller, turnId });
    let unsubscribe: () => void = () => undefined;
    try {
      unsubscribe = await this.cancelBus.onCancelRequested(sessionId, () =>
        controller.abort(abortReason("The turn was cancelled")),
      );
    } catch {
      // Without Redis the turn still runs (and is cancelled from this process); cancel from others fails.
    }
    const heartbeat = setInterval(
      () => {
        this.claims.heartbeat(turnId, this.ownerId).then(
          (held) => {
            if (!held) controller.abort(abortReason("The turn lost its session claim"));
          },
          () => undefined, // a failed renewal is retried on the next beat; the TTL covers the gap
        );
      },
      Math.max(1, Math.floor(this.turnTtlMs / 3)),
    );
    heartbeat.unref();
    let ended = false;
    return {
      sessionId,
      turnId,
      signal: controller.signal,
      end: () => {
        if (!ended) {
          ended = true;
          clearInterval(heartbeat);
          unsubscribe();
          if (this.local.get(sessionId)?.controller === controller) this.local.delete(sessionId);
        }
        return Promise.resolve();
      },
    };
  }

  /** Cancels the session's running turn wherever it runs. False when no live turn received it. */
  async cancel(sessionId: string): Promise<boolean> {
    const running = this.local.get(sessionId);
    if (running) {
      running.controller.abort(abortReason("The turn was cancelled"));
      return true;
    }
    return this.cancelBus.requestCancel(sessionId);
  }

  /** Whether a turn of this session runs in THIS process. */
  isRunningHere(sessionId: string): boolean {
    return this.local.has(sessionId);
  }
}

function conflict(sessionId: string): AppError {
  return new AppError("CONFLICT", `A turn is already running in session ${sessionId}`, {
    userMessage: "A reply is already in progress in this session. Wait for it or cancel it first.",
    details: { sessionId },
  });
}

function abortReason(message: string): DOMException {
  return new DOMException(message, "AbortError");
}
