import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ErrorCode, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { AppError } from "@/server/shared/errors";
import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";
import { StdioTransport } from "@/server/workspace/mcp/stdio-transport";
import { ToolCallRelay } from "@/server/workspace/mcp/tool-call-relay";
import type { LiveMcpClient } from "@/server/workspace/mcp/types";
import { everythingMcp } from "./support/mcp-servers";

/**
 * The gateway's connector (relayToolCalls: true): plain tool calls of a stateful stdio session go straight
 * onto the transport (tool-call-relay.ts) and behave as the SDK client's calls do.
 */
const scope = { agentId: "agent", sessionId: "session" };
const opened: LiveMcpClient[] = [];
const connector = new LocalMcpConnector({ defaultCallTimeoutMs: 20_000, relayToolCalls: true });

async function register(declaration: Parameters<LocalMcpConnector["connect"]>[0]) {
  const client = await connector.connect(declaration, scope);
  await client.listTools(); // what the gateway does at registration: it tells which tools are plain
  return client;
}

/** A session of its own (a declaration with its own settings, or one the test ends), closed after it. */
async function connect(declaration: Parameters<LocalMcpConnector["connect"]>[0]): Promise<LiveMcpClient> {
  const client = await register(declaration);
  opened.push(client);
  return client;
}

/**
 * One server-everything session for the tests that call plain declarations' tools (each process costs
 * seconds of CPU to start on the CI machine); every one of them also shows that the session is still
 * usable after what the tests before it did to it (an aborted call, a protocol error).
 */
let shared: LiveMcpClient;
beforeAll(async () => {
  shared = await register(everythingMcp("everything"));
});
afterAll(async () => {
  await shared?.close();
});

afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(opened.splice(0).map((client) => client.close()));
});

describe("LocalMcpConnector with relayed tool calls", { timeout: 120_000 }, () => {
  it("calls plain tools without the SDK client's callTool, with the same result", async () => {
    const client = shared;
    const sdkCall = vi.spyOn(Client.prototype, "callTool");
    const results = await Promise.all(["a", "b", "c"].map((message) => client.callTool("echo", { message })));
    expect(results).toEqual(
      ["a", "b", "c"].map((message) => ({
        content: [{ type: "text", text: `Echo: ${message}` }],
        isError: false,
      })),
    );
    expect(sdkCall).not.toHaveBeenCalled();
  });

  it("takes the answers to its calls before the transport's schema check", async () => {
    const client = shared;
    const schemaParse = vi.spyOn(JSONRPCMessageSchema, "parse");
    await client.callTool("echo", { message: "a" });
    await client.callTool("echo", { message: "b" });
    expect(schemaParse).not.toHaveBeenCalled();
  });

  it("leaves tools with an output schema to the SDK, which validates their structured content", async () => {
    const client = shared;
    const sdkCall = vi.spyOn(Client.prototype, "callTool");
    const result = await client.callTool("get-structured-content", { location: "New York" });
    expect(result.structuredContent).toBeDefined();
    expect(sdkCall).toHaveBeenCalledTimes(1);
  });

  it("times out a slow call, cancels it upstream and keeps the session usable", async () => {
    const client = await connect(everythingMcp("slow", { execution_timeout: 0.3 }));
    const error = await client
      .callTool("trigger-long-running-operation", { duration: 30, steps: 3 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({
      code: "TIMEOUT",
      details: { timeoutMs: 300, tool: "trigger-long-running-operation" },
    });
    expect(await client.callTool("echo", { message: "still here" })).toMatchObject({ isError: false });
  });

  it("aborts a call through the caller's signal as the SDK does (TIMEOUT)", async () => {
    const client = shared;
    const controller = new AbortController();
    const call = client.callTool(
      "trigger-long-running-operation",
      { duration: 30, steps: 3 },
      { signal: controller.signal },
    );
    controller.abort();
    await expect(call).rejects.toMatchObject({ code: "TIMEOUT" });
  });

  it("maps an upstream protocol error as the SDK path does", async () => {
    const client = shared;
    const result = await client.callTool("get-sum", { a: "not a number" }).catch((e: unknown) => e);
    if (result instanceof AppError) expect(result.code).toBe("BAD_REQUEST");
    else expect(result).toMatchObject({ isError: true });
  });

  it("fails calls in flight UNAVAILABLE when the server goes away", async () => {
    const client = await connect(everythingMcp("dies"));
    const call = client.callTool("trigger-long-running-operation", { duration: 30, steps: 3 });
    await client.close();
    await expect(call).rejects.toMatchObject({ code: "UNAVAILABLE" });
  });

  it("checks the answer's shape itself: a malformed error or a missing result rejects the call", async () => {
    // A server answering each tools/call with the next of these bodies.
    const answers = [{ error: { code: "not a number", message: 5 } }, { result: "text" }, { result: {} }];
    const transport = new StdioTransport({
      command: process.execPath,
      args: [
        "-e",
        `const answers = ${JSON.stringify(answers)}; let rest = "";
         process.stdin.on("data", (chunk) => {
           rest += chunk;
           for (let i; (i = rest.indexOf("\\n")) !== -1; rest = rest.slice(i + 1)) {
             const { id } = JSON.parse(rest.slice(0, i));
             process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id, ...answers.shift() }) + "\\n");
           }
         });`,
      ],
    });
    await transport.start();
    try {
      const relay = new ToolCallRelay(transport);
      const call = () => relay.call("tool", {}, { timeoutMs: 10_000 });
      await expect(call()).rejects.toMatchObject({ code: ErrorCode.InvalidRequest });
      await expect(call()).rejects.toMatchObject({ code: ErrorCode.InvalidRequest });
      await expect(call()).resolves.toEqual({});
    } finally {
      await transport.close();
    }
  });
});
