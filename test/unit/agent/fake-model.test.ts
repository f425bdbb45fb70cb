import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";

/** The fixture itself, checked on the raw wire (what any OpenAI client would see). */
let fake: FakeModelServer;
beforeEach(async () => {
  fake = await startFakeModel({ apiKey: "sk-fixture" });
});
afterEach(async () => fake.close());

function post(body: Record<string, unknown>, key = "sk-fixture") {
  return fetch(`${fake.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
}

function sseEvents(text: string): string[] {
  return text
    .split("\n\n")
    .filter((block) => block.startsWith("data: "))
    .map((block) => block.slice("data: ".length));
}

describe("fake model fixture", () => {
  it("answers non-streaming requests with a chat.completion carrying tool calls", async () => {
    fake.enqueue({ kind: "tool-calls", calls: [{ id: "c1", name: "Read", arguments: { file_path: "/a" } }] });
    const response = await post({ model: "m", messages: [{ role: "user", content: "x" }] });
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      object: "chat.completion",
      model: "m",
      choices: [
        {
          index: 0,
          finish_reason: "tool_calls",
          message: {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "c1", type: "function", function: { name: "Read", arguments: '{"file_path":"/a"}' } },
            ],
          },
        },
      ],
    });
    expect(body.usage).toMatchObject({
      prompt_tokens: expect.any(Number),
      completion_tokens: expect.any(Number),
    });
  });

  it("streams chunks with split tool-call arguments, a usage chunk and [DONE]", async () => {
    fake.enqueue({
      kind: "tool-calls",
      calls: [{ id: "c1", name: "Write", arguments: { file_path: "/a", content: "hello" } }],
    });
    const response = await post({
      model: "m",
      messages: [],
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const events = sseEvents(await response.text());
    expect(events.at(-1)).toBe("[DONE]");
    type ToolDelta = { index: number; id?: string; function: { name?: string; arguments: string } };
    type Chunk = {
      object: string;
      choices: Array<{ delta: { tool_calls?: ToolDelta[] }; finish_reason: string | null }>;
    };
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event) as Chunk);
    expect(chunks.every((chunk) => chunk.object === "chat.completion.chunk")).toBe(true);
    const toolDeltas = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []);
    expect(toolDeltas.length).toBeGreaterThan(1);
    expect(toolDeltas[0]).toMatchObject({
      index: 0,
      id: "c1",
      type: "function",
      function: { name: "Write" },
    });
    expect(toolDeltas.slice(1).every((delta) => delta.id === undefined)).toBe(true);
    const args = toolDeltas.map((delta) => delta.function.arguments).join("");
    expect(JSON.parse(args)).toEqual({ file_path: "/a", content: "hello" });
    expect(chunks.find((chunk) => chunk.choices[0]?.finish_reason)?.choices[0]?.finish_reason).toBe(
      "tool_calls",
    );
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { total_tokens: expect.any(Number) } });
  });

  it("omits the usage chunk unless the client asks for it", async () => {
    fake.enqueue({ kind: "text", text: "hi" });
    const events = sseEvents(await (await post({ model: "m", messages: [], stream: true })).text());
    expect(events.some((event) => event.includes('"usage"'))).toBe(false);
  });

  it("checks the bearer key without consuming a turn, and records the request", async () => {
    fake.enqueue({ kind: "text", text: "hi" });
    const rejected = await post({ model: "m", messages: [{ role: "user", content: "x" }] }, "sk-wrong");
    expect(rejected.status).toBe(401);
    expect(await rejected.json()).toMatchObject({ error: { code: "invalid_api_key" } });
    expect(fake.pendingTurns()).toBe(1);
    expect(fake.requests[0]).toMatchObject({
      authorization: "Bearer sk-wrong",
      model: "m",
      messages: [{ role: "user", content: "x" }],
    });
  });

  it("answers a scripted HTTP error and an empty queue with OpenAI-style errors", async () => {
    fake.enqueue({ kind: "http-error", status: 429, message: "slow down", code: "rate_limit" });
    const limited = await post({ model: "m", messages: [] });
    expect(limited.status).toBe(429);
    expect(await limited.json()).toEqual({
      error: { message: "slow down", type: "server_error", code: "rate_limit" },
    });
    expect((await post({ model: "m", messages: [] })).status).toBe(500);
    expect(fake.unexpectedRequests).toHaveLength(1);
    fake.unexpectedRequests.length = 0;
  });

  it("a stalled stream stays open until the client aborts, and records the abort", async () => {
    fake.enqueue({ kind: "stall", text: ["part"] });
    const response = await post({ model: "m", messages: [], stream: true });
    const reader = response.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain("chat.completion.chunk");
    const [request] = await fake.waitForRequests(1);
    expect(request!.wasAborted()).toBe(false);
    await reader.cancel(); // the client goes away

    await request!.clientAborted;
    expect(request!.wasAborted()).toBe(true);
  });
});
