import { afterEach, describe, expect, it, vi } from "vitest";
import type { TenantScope } from "@/server/auth/scope";
import { runTurn } from "@/server/agent/agent-loop";
import type { ClaimResult, StoredTurn } from "@/server/modules/chat/chat-turn.data";
import {
  InMemoryCancelBus,
  type Liveness,
  type TurnClaims,
  TurnRegistry,
} from "@/server/modules/chat/turn-registry";
import { AppError } from "@/server/shared/errors";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { RecordingOffloader, modelFor } from "../agent/support";

let fake: FakeModelServer | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const scope = { tenantId: "t1" } as TenantScope;

/** The Postgres claim semantics of chat-turn.data.ts, in memory (the real ones: the multi-process tests). */
class MemoryClaims implements TurnClaims {
  readonly turns = new Map<string, StoredTurn & { key: string | null }>();
  private running = new Map<string, string>();
  private next = 0;
  heartbeats = true;

  claim(_scope: TenantScope, input: Parameters<TurnClaims["claim"]>[1]): Promise<ClaimResult> {
    const same = [...this.turns.values()].find(
      (turn) => turn.sessionId === input.sessionId && turn.key !== null && turn.key === input.idempotencyKey,
    );
    if (same) return Promise.resolve({ kind: "same-key", turn: same });
    const current = this.turns.get(this.running.get(input.sessionId) ?? "");
    if (current?.status === "RUNNING") return Promise.resolve({ kind: "busy", turn: current });
    const turn = {
      id: `turn-${++this.next}`,
      sessionId: input.sessionId,
      status: "RUNNING" as const,
      ownerId: input.ownerId,
      heartbeatAt: new Date(),
      outcome: null,
      key: input.idempotencyKey,
    };
    this.turns.set(turn.id, turn);
    this.running.set(input.sessionId, turn.id);
    return Promise.resolve({ kind: "claimed", turn });
  }

  heartbeat(turnId: string, ownerId: string): Promise<boolean> {
    const turn = this.turns.get(turnId);
    return Promise.resolve(this.heartbeats && turn?.status === "RUNNING" && turn.ownerId === ownerId);
  }

  interrupt(_scope: TenantScope, _sessionId: string, turnId: string): Promise<boolean> {
    const turn = this.turns.get(turnId);
    if (turn?.status !== "RUNNING") return Promise.resolve(false);
    turn.status = "INTERRUPTED";
    return Promise.resolve(true);
  }

  get(_scope: TenantScope, turnId: string): Promise<StoredTurn | null> {
    return Promise.resolve(this.turns.get(turnId) ?? null);
  }

  finish(turnId: string): void {
    this.turns.get(turnId)!.status = "COMPLETED";
  }
}

/** `ownerId`'s liveness: the ids in `dead` known dead, those in `beating` known alive, the rest unknown. */
const alive = (ownerId: string, dead: string[] = [], beating: string[] = []): Liveness => ({
  ownerId,
  classify: (ids) =>
    Promise.resolve({
      alive: ids.filter((id) => beating.includes(id)),
      dead: ids.filter((id) => dead.includes(id)),
    }),
});

async function started(registry: TurnRegistry, sessionId: string, idempotencyKey: string | null = null) {
  const start = await registry.start(scope, { sessionId, idempotencyKey, userMessage: "hi" });
  if (start.kind !== "started") throw new Error(`expected a new turn, got ${start.kind}`);
  return start.turn;
}

describe("TurnRegistry", () => {
  it("refuses a second turn of a session with CONFLICT while the first's process lives, in any process", async () => {
    const claims = new MemoryClaims();
    const a = new TurnRegistry({ claims, liveness: alive("a") });
    const b = new TurnRegistry({ claims, liveness: alive("b") });
    const first = await started(a, "s1");
    for (const registry of [a, b]) {
      const error = await registry
        .start(scope, { sessionId: "s1", idempotencyKey: null, userMessage: "x" })
        .then(
          () => null,
          (thrown: unknown) => thrown,
        );
      expect(error).toBeInstanceOf(AppError);
      expect((error as AppError).code).toBe("CONFLICT");
      expect((error as AppError).userMessage).toMatch(/already in progress/);
    }
    const other = await started(b, "s2"); // other sessions are independent
    await other.end();
    claims.finish(first.turnId);
    await first.end();
    await (await started(b, "s1")).end();
  });

  it("a send with a key it has seen reports that turn instead of starting another", async () => {
    const claims = new MemoryClaims();
    const a = new TurnRegistry({ claims, liveness: alive("a") });
    const turn = await started(a, "s1", "key-00000001");
    const again = await a.start(scope, {
      sessionId: "s1",
      idempotencyKey: "key-00000001",
      userMessage: "hi",
    });
    expect(again).toMatchObject({ kind: "existing", turn: { id: turn.turnId, status: "RUNNING" } });
    claims.finish(turn.turnId);
    await turn.end();
    const ended = await a.start(scope, {
      sessionId: "s1",
      idempotencyKey: "key-00000001",
      userMessage: "hi",
    });
    expect(ended).toMatchObject({ kind: "existing", turn: { status: "COMPLETED" } });
  });

  it("takes over a session whose turn's process is dead, interrupting that turn; same key: reports it", async () => {
    const claims = new MemoryClaims();
    const crashed = new TurnRegistry({ claims, liveness: alive("a") });
    const survivor = new TurnRegistry({ claims, liveness: alive("b", ["a"]) });
    const lost = await started(crashed, "s1", "key-00000002");
    const report = await survivor.start(scope, {
      sessionId: "s1",
      idempotencyKey: "key-00000002",
      userMessage: "hi",
    });
    expect(report.kind).toBe("existing");
    const outcome = await survivor.awaitOutcome(scope, (report as { turn: StoredTurn }).turn);
    expect(outcome?.status).toBe("INTERRUPTED");
    await (await started(survivor, "s1")).end();
    await lost.end();
  });

  it("takes over a stale claim only when its process is not known alive (a live one's renewals may just wait)", async () => {
    const claims = new MemoryClaims();
    const slow = new TurnRegistry({ claims, liveness: alive("a") });
    const turn = await started(slow, "s1", "key-00000003");
    claims.turns.get(turn.turnId)!.heartbeatAt = new Date(Date.now() - 120_000);
    const send = { sessionId: "s1", idempotencyKey: "key-00000003", userMessage: "hi" };
    // Its own process runs it: alive, however stale its claim.
    expect(await slow.start(scope, send)).toMatchObject({ kind: "existing", turn: { status: "RUNNING" } });
    const peer = new TurnRegistry({ claims, liveness: alive("b", [], ["a"]) });
    expect(await peer.start(scope, send)).toMatchObject({ kind: "existing", turn: { status: "RUNNING" } });
    // Liveness unknown (Redis lost its data): the stale claim is dead.
    const blind = new TurnRegistry({ claims, liveness: alive("c") });
    expect(await blind.start(scope, send)).toMatchObject({
      kind: "existing",
      turn: { status: "INTERRUPTED" },
    });
    await turn.end();
  });

  it("aborts a turn whose claim was lost (its heartbeat finds it interrupted)", async () => {
    const claims = new MemoryClaims();
    const registry = new TurnRegistry({ claims, liveness: alive("a"), turnTtlMs: 30 });
    const turn = await started(registry, "s1");
    claims.heartbeats = false;
    await vi.waitFor(() => expect(turn.signal.aborted).toBe(true), { timeout: 5_000, interval: 10 });
    await turn.end();
  });

  it("cancel aborts the running turn's signal here, and reaches a turn running in another process", async () => {
    const claims = new MemoryClaims();
    const cancelBus = new InMemoryCancelBus();
    const a = new TurnRegistry({ claims, cancelBus, liveness: alive("a") });
    const b = new TurnRegistry({ claims, cancelBus, liveness: alive("b") });
    expect(await a.cancel("s1")).toBe(false);
    const turn = await started(a, "s1");
    expect(await b.cancel("s1")).toBe(true);
    expect(turn.signal.aborted).toBe(true);
    await turn.end();
    expect(a.isRunningHere("s1")).toBe(false);
  });

  it("cancelling through the registry stops a real streaming turn", async () => {
    fake = await startFakeModel();
    fake.enqueue({ kind: "stall", text: ["thinking"] });
    const registry = new TurnRegistry({ claims: new MemoryClaims() });
    const agentModel = modelFor(fake);
    const turn = await started(registry, "s1");
    const result = await runTurn({
      sessionId: "s1",
      model: agentModel.model,
      system: "sys",
      history: [],
      userMessage: "hi",
      tools: [],
      offloader: new RecordingOffloader(),
      signal: turn.signal,
      limits: { maxRetries: 0 },
      onEvent: (event) => {
        if (event.type === "text-delta") void registry.cancel("s1");
      },
    });
    await turn.end();
    expect(result.status).toBe("cancelled");
    await fake.requests[0]!.clientAborted;
  });
});
