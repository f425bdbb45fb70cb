import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runTurn, type RunTurnInput } from "@/server/agent/agent-loop";
import { modelEndpointForAgent, redactModelEndpoint } from "@/server/agent/model-provider";
import { fromStoredMessages, toStoredMessage } from "@/server/agent/stored-messages";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { RecordingOffloader, deferred, modelFor, testTool } from "./support";

let fake: FakeModelServer;
beforeEach(async () => {
  fake = await startFakeModel();
});
afterEach(async () => fake.close());

function turn(overrides: Partial<RunTurnInput>) {
  return runTurn({
    sessionId: "s1",
    model: modelFor(fake).model,
    system: "sys",
    history: [],
    userMessage: "hello",
    tools: [],
    offloader: new RecordingOffloader(),
    limits: { maxRetries: 0 },
    ...overrides,
  });
}

describe("stored messages", () => {
  it("a turn's messages survive storage and make a valid history for the next turn", async () => {
    fake.enqueue(
      { kind: "tool-calls", calls: [{ id: "call_1", name: "Echo", arguments: { text: "x" } }] },
      { kind: "text", text: "first answer" },
      { kind: "text", text: "second answer" },
    );
    const echo = testTool("Echo", () => Promise.resolve({ content: "echoed", isError: false }));
    const first = await turn({ tools: [echo] });
    const rows = first.newMessages.map(toStoredMessage);
    expect(rows.map((row) => row.role)).toEqual(["user", "assistant", "tool", "assistant"]);

    const second = await turn({ tools: [echo], history: fromStoredMessages(rows), userMessage: "again" });
    expect(second.status).toBe("completed");
    const sent = fake.requests[2]!.messages;
    expect(sent.map((message) => message.role)).toEqual([
      "system",
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
    ]);
    expect(sent[3]).toEqual({ role: "tool", tool_call_id: "call_1", content: "echoed" });
  });

  it("a turn cancelled during a tool call still leaves a valid history", async () => {
    fake.enqueue(
      { kind: "tool-calls", calls: [{ id: "call_slow", name: "Slow", arguments: {} }] },
      { kind: "text", text: "after cancel" },
    );
    const started = deferred();
    const slow = testTool(
      "Slow",
      (_input, { signal }) =>
        new Promise((_resolve, reject) => {
          signal?.addEventListener("abort", () => reject(new Error("aborted")));
          started.resolve();
        }),
    );
    const controller = new AbortController();
    const running = turn({ tools: [slow], signal: controller.signal });
    await started.promise;
    controller.abort();
    const cancelled = await running;

    const history = fromStoredMessages(cancelled.newMessages.map(toStoredMessage));
    const next = await turn({ tools: [slow], history, userMessage: "continue" });
    expect(next.status).toBe("completed");
    expect(fake.requests[1]!.messages).toContainEqual({
      role: "tool",
      tool_call_id: "call_slow",
      content: "The tool call did not finish: the turn was cancelled",
    });
  });

  it("rejects a damaged row", () => {
    expect(() => fromStoredMessages([{ role: "tool", content: "not parts" }])).toThrow(
      expect.objectContaining({ code: "INTERNAL" }),
    );
  });
});

describe("agent model endpoint", () => {
  it("maps an agent's stored model config and decrypted key", () => {
    expect(
      modelEndpointForAgent(
        { provider: "vllm", model: "qwen", baseUrl: "http://10.0.0.5:8000/v1", temperature: 0.2 },
        "k",
      ),
    ).toEqual({ baseUrl: "http://10.0.0.5:8000/v1", apiKey: "k", model: "qwen", temperature: 0.2 });
    expect(modelEndpointForAgent({ provider: "openai", model: "gpt" }, null)).toEqual({
      baseUrl: "https://api.openai.com/v1",
      apiKey: "",
      model: "gpt",
    });
    expect(() => modelEndpointForAgent({ provider: "mystery", model: "m" }, "k")).toThrow(
      expect.objectContaining({ code: "UNPROCESSABLE" }),
    );
  });

  it("never puts the key in what may be logged", () => {
    const redacted = redactModelEndpoint({ baseUrl: "http://x/v1", apiKey: "sk-secret", model: "m" });
    expect(redacted).toEqual({ baseUrl: "http://x/v1", model: "m", hasApiKey: true });
    expect(JSON.stringify(modelFor(fake, "sk-secret").description)).not.toContain("sk-secret");
  });

  it("sends no Authorization header when the agent has no key", async () => {
    fake.enqueue({ kind: "text", text: "ok" });
    await turn({ model: modelFor(fake, "").model });
    expect(fake.requests[0]!.authorization).toBeNull();
  });
});
