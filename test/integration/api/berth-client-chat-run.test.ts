/**
 * `client.chat.run` end to end over real HTTP: an API key, a real agent and session, the fake model behind
 * the agent, the workspace provisioned by real workers. It resolves once the turn is done with the final
 * text, usage and tool calls; a failed turn resolves with its error; a call refused before the turn
 * rejects with the API's error code. The walkthrough in server/client/README.md does exactly this.
 */
import { TRPCClientError } from "@trpc/client";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { handleTrpcRequest } from "@/server/api/http-handler";
import { createBerthClient, type BerthClient } from "@/server/client";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { serveFetchHandler, type ServedHandler } from "./support/serve-fetch-handler";
import { closeProcessBerth } from "@/server/composition/process-berth";

let h: AgentApiHarness;
let fake: FakeModelServer;
let server: ServedHandler;
let client: BerthClient;
let sessionId: string;

beforeAll(async () => {
  h = await startAgentApiHarness("crun");
  fake = await startFakeModel({ apiKey: "sk-run" });
  server = await serveFetchHandler((request) => handleTrpcRequest(request, h.runtime));
  client = createBerthClient({ url: server.url, apiKey: h.tenant.adminKey.plainKey });
  const agent = await client.agent.create.mutate({
    name: `runner-${randomUUID().slice(0, 8)}`,
    modelConfig: { baseUrl: fake.baseUrl, model: "fake-model", apiKey: "sk-run" },
  });
  ({ sessionId } = await client.session.create.mutate({ agentId: agent.id }));
});

afterAll(async () => {
  await server.close();
  await fake.close();
  await h.close();
  await closeProcessBerth();
});

describe("client.chat.run", () => {
  it("resolves when the turn is done, with the final text, usage and tool calls", async () => {
    fake.enqueue(
      { kind: "tool-calls", calls: [{ id: "c_glob", name: "Glob", arguments: { pattern: "*" } }] },
      {
        kind: "text",
        text: ["The workspace ", "is ready."],
        usage: { promptTokens: 40, completionTokens: 6 },
      },
    );
    const seen: string[] = [];
    const result = await client.chat.run(
      { sessionId, message: "What is in the workspace?" },
      { onEvent: (event) => seen.push(event.type) },
    );
    expect(result).toMatchObject({ status: "completed", text: "The workspace is ready.", error: null });
    expect(result.usage.outputTokens).toBeGreaterThanOrEqual(6);
    expect(result.toolCalls).toEqual([
      expect.objectContaining({
        toolCallId: "c_glob",
        toolName: "Glob",
        input: { pattern: "*" },
        isError: false,
      }),
    ]);
    expect(seen.at(-1)).toBe("done");
    expect(seen).toEqual(result.events.map((event) => event.type));
    // Resolved after the turn was stored: the history has it already.
    const history = await client.chat.history.query({ sessionId });
    expect(JSON.stringify(history)).toContain("The workspace is ready.");
  });

  it("completes and stores a turn whose tool output and text hold NUL bytes (binary output)", async () => {
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [{ id: "c_nul", name: "Bash", arguments: { command: "printf 'a\\000b'" } }],
      },
      { kind: "text", text: "Binary\u0000 output." },
    );
    const before = fake.requests.length;
    const result = await client.chat.run({ sessionId, message: "print a NUL" });
    expect(result).toMatchObject({ status: "completed", text: "Binary\u0000 output.", error: null });
    const told = "a\uFFFDb\n[Berth: 1 NUL byte(s) replaced with U+FFFD: output is binary or contains NUL]";
    expect(result.toolCalls).toEqual([expect.objectContaining({ toolCallId: "c_nul", output: told })]);
    expect(fake.requests[before + 1]!.messages.at(-1)).toMatchObject({ role: "tool", content: told });
    const history = JSON.stringify(await client.chat.history.query({ sessionId }));
    expect(history).toContain("Binary\uFFFD output.");
    expect(history).toContain("a\uFFFDb");
  });

  it("resolves a failed turn with its error in words", async () => {
    fake.enqueue({ kind: "http-error", status: 400, message: "the model refused this request" });
    const result = await client.chat.run({ sessionId, message: "fail, please" });
    expect(result.status).toBe("failed");
    expect(result.error?.message).toMatch(/refused/);
  });

  it("rejects with the API's error before any turn: an unknown session is NOT_FOUND", async () => {
    const error = await client.chat
      .run({ sessionId: "no-such-session", message: "hi" })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TRPCClientError);
    expect((error as TRPCClientError<never>).data).toMatchObject({ code: "NOT_FOUND" });
  });
});
