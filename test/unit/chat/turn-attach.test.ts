import { describe, expect, it } from "vitest";
import { mintTenantScope } from "@/server/auth/scope";
import type { StoredTurn, TurnOutcome } from "@/server/modules/chat/chat-turn.data";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { attachTurn, type TurnAttachDeps } from "@/server/modules/chat/turn-attach";
import { InMemoryTurnEventLog } from "@/server/modules/chat/turn-event-log";

const scope = mintTenantScope({ tenantId: "t1", userId: "u1", apiKeyId: null, role: "owner" });
const done = (status: "completed" | "interrupted"): Extract<TChatTurnEvent, { type: "done" }> => ({
  type: "done",
  status,
  finishReason: null,
  usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
  steps: 1,
});

function turnOf(status: StoredTurn["status"], outcome: TurnOutcome | null = null): StoredTurn {
  return { id: "turn-1", sessionId: "s1", status, ownerId: "p1", heartbeatAt: new Date(), outcome };
}

function depsOver(log: InMemoryTurnEventLog, state: { turn: StoredTurn }, dead = false): TurnAttachDeps {
  return {
    log,
    getTurn: () => Promise.resolve(state.turn),
    getTurnHeader: () => Promise.resolve(null),
    runningTurnOf: () => Promise.resolve(null),
    interruptIfDead: () => {
      if (!dead) return Promise.resolve(false);
      state.turn = turnOf("INTERRUPTED", { done: done("interrupted"), text: "", error: null });
      return Promise.resolve(true);
    },
    pollMs: 5,
    statusEveryMs: 10,
  };
}

async function collect(events: AsyncIterable<{ seq: number; event: TChatTurnEvent }>) {
  const seen: Array<{ seq: number; event: TChatTurnEvent }> = [];
  for await (const entry of events) seen.push(entry);
  return seen;
}

describe("attachTurn", () => {
  it("replays a running turn from a sequence number, then follows it live until done", async () => {
    const log = new InMemoryTurnEventLog();
    const state = { turn: turnOf("RUNNING") };
    log.append("turn-1", 1, { type: "text-delta", text: "a" });
    log.append("turn-1", 2, { type: "text-delta", text: "b" });
    const attached = collect(attachTurn(depsOver(log, state), scope, "turn-1", 2));
    setTimeout(() => {
      log.append("turn-1", 3, { type: "text-delta", text: "c" });
      log.append("turn-1", 4, done("completed"));
    }, 20);
    expect(await attached).toEqual([
      { seq: 2, event: { type: "text-delta", text: "b" } },
      { seq: 3, event: { type: "text-delta", text: "c" } },
      { seq: 4, event: done("completed") },
    ]);
  });

  it("ends a turn whose log is gone from its stored outcome", async () => {
    const state = {
      turn: turnOf("COMPLETED", { done: done("completed"), text: "all of it", error: null }),
    };
    const events = await collect(attachTurn(depsOver(new InMemoryTurnEventLog(), state), scope, "turn-1"));
    expect(events.map((entry) => entry.event)).toEqual([
      { type: "text-delta", text: "all of it" },
      done("completed"),
    ]);
  });

  it("interrupts a turn whose process died, and ends with that", async () => {
    const log = new InMemoryTurnEventLog();
    log.append("turn-1", 1, { type: "text-delta", text: "half" });
    const state = { turn: turnOf("RUNNING") };
    const events = await collect(attachTurn(depsOver(log, state, true), scope, "turn-1"));
    expect(events.map((entry) => entry.event.type)).toEqual(["text-delta", "done"]);
    expect(events.at(-1)?.event).toMatchObject({ status: "interrupted" });
  });
});
