import type { ModelMessage } from "ai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { streamTurn } from "@/server/agent/agent-loop";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import {
  RecordingOffloader,
  deferred,
  eventTypes,
  modelFor,
  phases,
  runTestTurn,
  testTool,
  type TurnOverrides,
} from "./support";

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

describe("runTurn against the fake model", () => {
  it("streams text deltas in order and ends with done", async () => {
    fake.enqueue({
      kind: "text",
      text: ["Hel", "lo ", "world"],
      usage: { promptTokens: 11, completionTokens: 3 },
    });
    const events: TChatTurnEvent[] = [];
    const result = await turn({ events });

    expect(events).toEqual([
      { type: "text-delta", text: "Hel" },
      { type: "text-delta", text: "lo " },
      { type: "text-delta", text: "world" },
      {
        type: "done",
        status: "completed",
        finishReason: "stop",
        usage: { inputTokens: 11, outputTokens: 3, totalTokens: 14 },
        steps: 1,
      },
    ]);
    expect(result.status).toBe("completed");
    expect(result.newMessages).toEqual([
      { role: "user", content: "hello" },
      { role: "assistant", content: [{ type: "text", text: "Hello world" }] },
    ]);
    const [request] = fake.requests;
    expect(request?.model).toBe("fake-model-1");
    expect(request?.stream).toBe(true);
    expect(request?.messages).toEqual([
      { role: "system", content: "You are a test agent." },
      { role: "user", content: "hello" },
    ]);
  });

  it("executes a tool call and feeds its result back as a role:tool message", async () => {
    fake.enqueue(
      {
        kind: "tool-calls",
        text: "Checking.",
        calls: [{ id: "call_a", name: "Echo", arguments: { text: "ping" } }],
      },
      { kind: "text", text: "The echo said pong." },
    );
    const seenInputs: unknown[] = [];
    const echo = testTool("Echo", (input) => {
      seenInputs.push(input);
      return Promise.resolve({ content: "pong", isError: false });
    });
    const events: TChatTurnEvent[] = [];
    const result = await turn({ tools: [echo], events });

    expect(seenInputs).toEqual([{ text: "ping" }]);
    expect(phases(events)).toEqual(["text-delta", "tool-call", "tool-result", "text-delta", "done"]);
    expect(events).toContainEqual({
      type: "tool-call",
      toolCallId: "call_a",
      toolName: "Echo",
      input: { text: "ping" },
    });
    expect(events).toContainEqual({
      type: "tool-result",
      toolCallId: "call_a",
      toolName: "Echo",
      output: "pong",
      isError: false,
    });
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[0]?.tools.map((tool) => tool.function.name)).toEqual(["Echo"]);
    const second = fake.requests[1]!.messages;
    expect(second.at(-2)).toMatchObject({
      role: "assistant",
      tool_calls: [
        { id: "call_a", type: "function", function: { name: "Echo", arguments: '{"text":"ping"}' } },
      ],
    });
    expect(second.at(-1)).toEqual({ role: "tool", tool_call_id: "call_a", content: "pong" });
    expect(result.steps).toBe(2);
    expect(result.newMessages.map((message) => message.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
    ]);
  });

  it("offloads a large tool result and sends only its reference and a preview to the model", async () => {
    const big = "x".repeat(40_000) + "TAIL-MARKER";
    fake.enqueue(
      { kind: "tool-calls", calls: [{ id: "call_big", name: "Dump", arguments: {} }] },
      { kind: "text", text: "Noted." },
    );
    const events: TChatTurnEvent[] = [];
    const result = await turn({
      tools: [testTool("Dump", () => Promise.resolve({ content: big, isError: false }))],
      limits: { maxRetries: 0, toolResultOffloadBytes: 16 * 1024, toolResultPreviewChars: 500 },
      events,
    });

    expect(offloader.toolResults).toEqual([
      {
        sessionId: "s1",
        toolCallId: "call_big",
        text: big,
        reference: "workspace:///sessions/s1/tool_result-call_big.txt",
      },
    ]);
    const toolMessage = fake.requests[1]!.messages.at(-1)!;
    expect(toolMessage.role).toBe("tool");
    const sent = String(toolMessage.content);
    expect(sent).toContain("'workspace:///sessions/s1/tool_result-call_big.txt'");
    expect(sent).not.toContain("TAIL-MARKER");
    expect(sent.length).toBeLessThan(1500);
    const offloadIndex = events.findIndex((event) => event.type === "offload");
    expect(events[offloadIndex]).toEqual({
      type: "offload",
      kind: "tool-result",
      reference: "workspace:///sessions/s1/tool_result-call_big.txt",
      bytes: Buffer.byteLength(big),
      toolCallId: "call_big",
    });
    expect(events[offloadIndex + 1]).toMatchObject({
      type: "tool-result",
      offloadedTo: "workspace:///sessions/s1/tool_result-call_big.txt",
    });
    // What gets persisted is the note, not the 40 KB.
    expect(JSON.stringify(result.newMessages)).not.toContain("TAIL-MARKER");
  });

  it("keeps small tool results inline", async () => {
    fake.enqueue(
      { kind: "tool-calls", calls: [{ name: "Small", arguments: {} }] },
      { kind: "text", text: "ok" },
    );
    await turn({ tools: [testTool("Small", () => Promise.resolve({ content: "tiny", isError: false }))] });
    expect(offloader.toolResults).toHaveLength(0);
    expect(fake.requests[1]!.messages.at(-1)?.content).toBe("tiny");
  });

  it("compacts a long history: the old part is offloaded and replaced by a stub with its reference", async () => {
    const history: ModelMessage[] = [];
    for (let index = 0; index < 8; index++) {
      history.push({ role: "user", content: `request number ${index}: ${"lorem ipsum ".repeat(40)}` });
      history.push({
        role: "assistant",
        content: [{ type: "text", text: `answer ${index} ${"dolor ".repeat(40)}` }],
      });
    }
    fake.enqueue({ kind: "text", text: "Continuing." });
    const events: TChatTurnEvent[] = [];
    const result = await turn({
      history,
      limits: { maxRetries: 0, historyTokenBudget: 800, keepRecentTokens: 400 },
      events,
    });

    expect(offloader.contexts).toHaveLength(1);
    const offloaded = offloader.contexts[0]!.messages;
    expect(offloaded).toEqual(history.slice(0, offloaded.length));
    expect(offloaded.length).toBeGreaterThan(0);
    expect(offloaded.length % 2).toBe(0); // cut at a user message

    const sent = fake.requests[0]!.messages;
    expect(sent[0]).toEqual({ role: "system", content: "You are a test agent." });
    expect(sent[1]?.role).toBe("user");
    expect(String(sent[1]?.content)).toContain("'workspace:///sessions/s1/context.jsonl'");
    expect(String(sent[1]?.content)).toContain("request number 0");
    expect(sent.slice(2, -1)).toHaveLength(history.length - offloaded.length);
    expect(sent.at(-1)).toEqual({ role: "user", content: "hello" });

    expect(events[0]).toMatchObject({
      type: "offload",
      kind: "context",
      reference: "workspace:///sessions/s1/context.jsonl",
      messageCount: offloaded.length,
    });
    expect(result.compaction).toMatchObject({
      reference: "workspace:///sessions/s1/context.jsonl",
      replacedCount: offloaded.length,
    });
  });

  it("does not compact a history within budget", async () => {
    fake.enqueue({ kind: "text", text: "ok" });
    const history: ModelMessage[] = [
      { role: "user", content: "earlier" },
      { role: "assistant", content: "reply" },
    ];
    const result = await turn({ history });
    expect(offloader.contexts).toHaveLength(0);
    expect(result.compaction).toBeNull();
    expect(fake.requests[0]!.messages).toHaveLength(4);
  });

  it("cancel mid-stream stops the model stream and keeps the partial text", async () => {
    fake.enqueue({ kind: "stall", text: ["partial ", "answer"] });
    const controller = new AbortController();
    const events: TChatTurnEvent[] = [];
    const result = await turn({
      signal: controller.signal,
      onEvent: (event) => {
        events.push(event);
        if (event.type === "text-delta" && event.text === "answer") controller.abort();
      },
    });

    expect(result.status).toBe("cancelled");
    expect(events.at(-1)).toMatchObject({ type: "done", status: "cancelled" });
    expect(events.some((event) => event.type === "error")).toBe(false);
    await fake.requests[0]!.clientAborted; // the HTTP stream to the provider was closed
    expect(fake.requests[0]!.wasAborted()).toBe(true);
    expect(result.newMessages).toEqual([
      { role: "user", content: "hello" },
      { role: "assistant", content: [{ type: "text", text: "partial answer" }] },
    ]);
  });

  it("cancel aborts a running tool through its signal, and sends no further model request", async () => {
    fake.enqueue({ kind: "tool-calls", calls: [{ id: "call_slow", name: "Slow", arguments: {} }] });
    const started = deferred();
    let toolSawAbort = false;
    const slow = testTool(
      "Slow",
      (_input, { signal }) =>
        new Promise((_resolve, reject) => {
          signal?.addEventListener("abort", () => {
            toolSawAbort = true;
            reject(new Error("tool aborted"));
          });
          started.resolve();
        }),
    );
    const controller = new AbortController();
    const running = turn({ tools: [slow], signal: controller.signal });
    await started.promise;
    controller.abort();
    const result = await running;

    expect(toolSawAbort).toBe(true);
    expect(result.status).toBe("cancelled");
    expect(fake.requests).toHaveLength(1);
    // The interrupted call is persisted with a result, so the next request stays valid for the provider.
    expect(result.newMessages.slice(1)).toEqual([
      {
        role: "assistant",
        content: [{ type: "tool-call", toolCallId: "call_slow", toolName: "Slow", input: {} }],
      },
      {
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: "call_slow",
            toolName: "Slow",
            output: { type: "error-text", value: "The tool call did not finish: the turn was cancelled" },
          },
        ],
      },
    ]);
  });

  it("an already aborted signal ends the turn without calling the model", async () => {
    const controller = new AbortController();
    controller.abort();
    const events: TChatTurnEvent[] = [];
    const result = await turn({ signal: controller.signal, events });
    expect(result.status).toBe("cancelled");
    expect(fake.requests).toHaveLength(0);
    expect(eventTypes(events)).toEqual(["done"]);
  });
});

describe("provider wiring", () => {
  it("sends the agent's API key as the Authorization bearer", async () => {
    fake.enqueue({ kind: "text", text: "hi" });
    const agentModel = modelFor(fake, "sk-agent-42");
    await turn({ model: agentModel.model });
    expect(fake.requests[0]!.authorization).toBe("Bearer sk-agent-42");
  });

  it("streamTurn yields the same events as an async iterable", async () => {
    fake.enqueue({ kind: "text", text: ["a", "b"] });
    const agentModel = modelFor(fake);
    const { events, result } = streamTurn({
      sessionId: "s1",
      model: agentModel.model,
      system: "sys",
      history: [],
      userMessage: "go",
      tools: [],
      offloader,
    });
    const seen: TChatTurnEvent[] = [];
    for await (const event of events) seen.push(event);
    expect(eventTypes(seen)).toEqual(["text-delta", "text-delta", "done"]);
    await expect(result).resolves.toMatchObject({ status: "completed" });
  });

  it("passes temperature and maxOutputTokens from the agent's config", async () => {
    fake.enqueue({ kind: "text", text: "ok" });
    const { createAgentModel } = await import("@/server/agent/model-provider");
    const agentModel = createAgentModel({
      baseUrl: fake.baseUrl,
      apiKey: "k",
      model: "m",
      temperature: 0.3,
      maxOutputTokens: 77,
    });
    await turn({ model: agentModel.model, modelSettings: agentModel.settings });
    expect(fake.requests[0]!.body).toMatchObject({ temperature: 0.3, max_tokens: 77 });
  });
});
