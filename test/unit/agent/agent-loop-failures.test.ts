import type { ModelMessage } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { RecordingOffloader, runTestTurn, type TurnOverrides, modelFor, testTool } from "./support";

let fake: FakeModelServer;
let offloader: RecordingOffloader;

beforeEach(async () => {
  fake = await startFakeModel();
  offloader = new RecordingOffloader();
});

afterEach(async () => {
  expect(fake.unexpectedRequests).toHaveLength(0);
  await fake.close();
});

const turn = (overrides: TurnOverrides) => runTestTurn(fake, offloader, overrides);

describe("runTurn failures", () => {
  it("turns an HTTP 500 into a typed error event and keeps the user message", async () => {
    fake.enqueue({ kind: "http-error", status: 500, message: "upstream exploded" });
    const events: TChatTurnEvent[] = [];
    const result = await turn({ events });

    expect(events).toEqual([
      {
        type: "error",
        code: "UNAVAILABLE",
        message: "The model provider failed (HTTP 500). Try again later.",
        retryable: true,
      },
      {
        type: "done",
        status: "failed",
        finishReason: null,
        usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
        steps: 0,
      },
    ]);
    expect(result.status).toBe("failed");
    expect(result.error?.code).toBe("UNAVAILABLE");
    expect(result.newMessages).toEqual([{ role: "user", content: "hello" }]);
  });

  it("retries a 500 when retries are allowed", async () => {
    fake.enqueue({ kind: "http-error", status: 503 }, { kind: "text", text: "recovered" });
    const result = await turn({ limits: { maxRetries: 1 } });
    expect(result.status).toBe("completed");
    expect(fake.requests).toHaveLength(2);
  });

  it("reports a rejected API key as a configuration error without echoing the key", async () => {
    await fake.close();
    fake = await startFakeModel({ apiKey: "sk-right" });
    const events: TChatTurnEvent[] = [];
    const agentModel = modelFor(fake, "sk-wrong-secret");
    const result = await turn({ model: agentModel.model, events });

    const error = events.find((event) => event.type === "error");
    expect(error).toEqual({
      type: "error",
      code: "UNPROCESSABLE",
      message:
        "The model provider rejected the agent's API key (HTTP 401). Check the agent's model settings.",
      retryable: false,
    });
    expect(JSON.stringify(events)).not.toContain("sk-wrong-secret");
    expect(result.error?.message).not.toContain("sk-wrong-secret");
    expect(fake.requests).toHaveLength(1); // 401 is not retried
  });

  it("keeps the completed tool step when a later model call fails", async () => {
    fake.enqueue(
      { kind: "tool-calls", calls: [{ id: "call_1", name: "Echo", arguments: { text: "a" } }] },
      { kind: "http-error", status: 500 },
    );
    const result = await turn({
      tools: [testTool("Echo", () => Promise.resolve({ content: "a", isError: false }))],
    });
    expect(result.status).toBe("failed");
    expect(result.newMessages.map((message) => message.role)).toEqual(["user", "assistant", "tool"]);
  });

  it("feeds tool errors, thrown errors and unknown tools back to the model as error results", async () => {
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [
          { id: "c1", name: "Fails", arguments: {} },
          { id: "c2", name: "Throws", arguments: {} },
          { id: "c3", name: "Missing", arguments: {} },
        ],
      },
      { kind: "text", text: "I see the errors." },
    );
    const events: TChatTurnEvent[] = [];
    const result = await turn({
      tools: [
        testTool("Fails", () => Promise.resolve({ content: "Error: no such file", isError: true })),
        testTool("Throws", () => Promise.reject(new Error("kaput"))),
      ],
      events,
    });

    expect(result.status).toBe("completed");
    const results = events.filter((event) => event.type === "tool-result");
    expect(results.map((event) => [event.toolCallId, event.isError])).toEqual(
      expect.arrayContaining([
        ["c1", true],
        ["c2", true],
        ["c3", true],
      ]),
    );
    const toolMessages = fake.requests[1]!.messages.filter((message) => message.role === "tool");
    expect(toolMessages.map((message) => message.tool_call_id).sort()).toEqual(["c1", "c2", "c3"]);
    expect(toolMessages.find((message) => message.tool_call_id === "c2")?.content).toContain("kaput");
  });

  it("stops after maxSteps model calls", async () => {
    fake.enqueue(
      { kind: "tool-calls", calls: [{ name: "Echo", arguments: {} }] },
      { kind: "tool-calls", calls: [{ name: "Echo", arguments: {} }] },
    );
    const result = await turn({
      tools: [testTool("Echo", () => Promise.resolve({ content: "again", isError: false }))],
      limits: { maxRetries: 0, maxSteps: 2 },
    });
    expect(result.status).toBe("completed");
    expect(result.steps).toBe(2);
    expect(result.finishReason).toBe("tool-calls");
    expect(fake.requests).toHaveLength(2);
  });
});

describe("limits and transport failures", () => {
  it("aborts a tool that exceeds toolTimeoutMs and reports the timeout to the model", async () => {
    fake.enqueue(
      { kind: "tool-calls", calls: [{ id: "call_hang", name: "Hang", arguments: {} }] },
      { kind: "text", text: "It timed out." },
    );
    let toolSawAbort = false;
    const hang = testTool(
      "Hang",
      (_input, { signal }) =>
        new Promise((_resolve, reject) => {
          signal?.addEventListener("abort", () => {
            toolSawAbort = true;
            reject(new Error("aborted"));
          });
        }),
    );
    const events: TChatTurnEvent[] = [];
    const result = await turn({ tools: [hang], limits: { maxRetries: 0, toolTimeoutMs: 100 }, events });

    expect(toolSawAbort).toBe(true);
    expect(result.status).toBe("completed");
    expect(events).toContainEqual(
      expect.objectContaining({ type: "tool-result", toolCallId: "call_hang", isError: true }),
    );
    expect(fake.requests[1]!.messages.at(-1)).toMatchObject({ role: "tool", tool_call_id: "call_hang" });
  });

  it("reports an unreachable endpoint as UNAVAILABLE", async () => {
    const closed = await startFakeModel();
    const agentModel = modelFor(closed);
    await closed.close();
    const events: TChatTurnEvent[] = [];
    const result = await turn({ model: agentModel.model, events });
    expect(result.status).toBe("failed");
    expect(events[0]).toMatchObject({ type: "error", code: "UNAVAILABLE", retryable: true });
  });
});

describe("workspace failures", () => {
  it("fails the turn with a clear error when the history cannot be offloaded for compaction", async () => {
    const history: ModelMessage[] = [
      { role: "user", content: "old ".repeat(400) },
      { role: "assistant", content: "reply ".repeat(400) },
      { role: "user", content: "newer" },
      { role: "assistant", content: "ok" },
    ];
    const events: TChatTurnEvent[] = [];
    const result = await turn({
      history,
      offloader: {
        offloadToolResult: () => Promise.reject(new Error("disk gone")),
        offloadContext: () => Promise.reject(new Error("disk gone")),
      },
      limits: { maxRetries: 0, historyTokenBudget: 100, keepRecentTokens: 50 },
      events,
    });
    expect(result.status).toBe("failed");
    expect(events[0]).toMatchObject({ type: "error", code: "UNAVAILABLE" });
    expect(fake.requests).toHaveLength(0);
  });

  it("truncates a large tool result when the offload fails, and the turn goes on", async () => {
    fake.enqueue(
      { kind: "tool-calls", calls: [{ id: "c1", name: "Big", arguments: {} }] },
      { kind: "text", text: "ok" },
    );
    const result = await turn({
      tools: [testTool("Big", () => Promise.resolve({ content: "y".repeat(50_000), isError: false }))],
      offloader: {
        offloadToolResult: () => Promise.reject(new Error("disk gone")),
        offloadContext: () => Promise.reject(new Error("disk gone")),
      },
    });
    expect(result.status).toBe("completed");
    const sent = String(fake.requests[1]!.messages.at(-1)!.content);
    expect(sent).toContain("could not be saved to the workspace");
    expect(sent.length).toBeLessThan(3000);
  });
});
