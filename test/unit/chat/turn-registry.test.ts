import { afterEach, describe, expect, it } from "vitest";
import { runTurn } from "@/server/modules/chat/agent-loop";
import { InMemoryTurnLock, TurnRegistry } from "@/server/modules/chat/turn-registry";
import { AppError } from "@/server/shared/errors";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { RecordingOffloader, modelFor } from "./support";

let fake: FakeModelServer | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function conflictOf(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => null,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

describe("TurnRegistry", () => {
  it("rejects a second turn on the same session with CONFLICT, and allows it after the first ends", async () => {
    const registry = new TurnRegistry();
    const first = await registry.start("s1");
    const error = await conflictOf(registry.start("s1"));
    expect(error.code).toBe("CONFLICT");
    expect(error.userMessage).toMatch(/already in progress/);

    const other = await registry.start("s2"); // other sessions are independent
    await other.end();
    await first.end();
    const again = await registry.start("s1");
    await again.end();
  });

  it("two concurrent starts: exactly one wins", async () => {
    const registry = new TurnRegistry();
    const outcomes = await Promise.allSettled([registry.start("s1"), registry.start("s1")]);
    expect(outcomes.filter((outcome) => outcome.status === "fulfilled")).toHaveLength(1);
    const rejected = outcomes.find((outcome) => outcome.status === "rejected");
    expect((rejected?.reason as AppError).code).toBe("CONFLICT");
  });

  it("cancel aborts the running turn's signal; cancelling an idle session reports false", async () => {
    const registry = new TurnRegistry();
    expect(await registry.cancel("s1")).toBe(false);
    const turn = await registry.start("s1");
    expect(turn.signal.aborted).toBe(false);
    expect(await registry.cancel("s1")).toBe(true);
    expect(turn.signal.aborted).toBe(true);
    await turn.end();
    expect(registry.isRunningHere("s1")).toBe(false);
  });

  it("with a shared lock, a second process gets CONFLICT and its cancel reaches the first", async () => {
    const lock = new InMemoryTurnLock();
    const processA = new TurnRegistry({ lock });
    const processB = new TurnRegistry({ lock });
    const turn = await processA.start("s1");

    expect((await conflictOf(processB.start("s1"))).code).toBe("CONFLICT");
    expect(processB.isRunningHere("s1")).toBe(false);
    expect(await processB.cancel("s1")).toBe(true);
    expect(turn.signal.aborted).toBe(true);

    await turn.end();
    const next = await processB.start("s1");
    await next.end();
  });

  it("an expired lock can be taken over; the old holder's renewal then fails", async () => {
    const lock = new InMemoryTurnLock();
    expect(await lock.acquire("s1", "a", 0)).toBe(true);
    expect(await lock.acquire("s1", "b", 60_000)).toBe(true);
    expect(await lock.renew("s1", "a", 60_000)).toBe(false);
    await lock.release("s1", "a"); // not the holder: no effect
    expect(await lock.acquire("s1", "c", 60_000)).toBe(false);
  });

  it("run() ends the turn even when the work throws", async () => {
    const registry = new TurnRegistry();
    await expect(registry.run("s1", () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(registry.isRunningHere("s1")).toBe(false);
  });

  it("cancelling through the registry stops a real streaming turn", async () => {
    fake = await startFakeModel();
    fake.enqueue({ kind: "stall", text: ["thinking"] });
    const registry = new TurnRegistry();
    const agentModel = modelFor(fake);
    const result = await registry.run("s1", (signal) =>
      runTurn({
        sessionId: "s1",
        model: agentModel.model,
        system: "sys",
        history: [],
        userMessage: "hi",
        tools: [],
        offloader: new RecordingOffloader(),
        signal,
        limits: { maxRetries: 0 },
        onEvent: (event) => {
          if (event.type === "text-delta") void registry.cancel("s1");
        },
      }),
    );
    expect(result.status).toBe("cancelled");
    await fake.requests[0]!.clientAborted;
  });
});
