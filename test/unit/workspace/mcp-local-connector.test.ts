import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "@/server/shared/errors";
import { LocalMcpConnector, selectHttpTransport } from "@/server/workspace/mcp/local-connector";
import type { LiveMcpClient } from "@/server/workspace/mcp/types";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import {
  everythingMcp,
  filesystemMcp,
  httpMcp,
  startHttpMcpServer,
  startSseMcpServer,
  type TestHttpMcpServer,
} from "./support/mcp-servers";

const scope = { agentId: "agent", sessionId: "session" };
const opened: LiveMcpClient[] = [];
const connector = new LocalMcpConnector({ defaultCallTimeoutMs: 20_000 });

async function connect(declaration: Parameters<LocalMcpConnector["connect"]>[0]): Promise<LiveMcpClient> {
  const client = await connector.connect(declaration, scope);
  opened.push(client);
  return client;
}

afterEach(async () => {
  await Promise.all(opened.splice(0).map((client) => client.close()));
});

/**
 * One server-everything session for the tests of a plain declaration (each process costs seconds of CPU
 * to start on the CI machine); each of them also shows the session still usable after the ones before it.
 * Declarations with settings of their own (tool lists, a timeout) and the close test get their own.
 */
let shared: LiveMcpClient;
beforeAll(async () => {
  shared = await connector.connect(everythingMcp("everything"), scope);
});
afterAll(async () => {
  await shared?.close();
});

describe("LocalMcpConnector over stdio (server-everything from npm)", { timeout: 120_000 }, () => {
  it("lists tools with JSON schemas and calls one", async () => {
    const client = shared;
    expect(client.isConnected).toBe(true);
    const tools = await client.listTools();
    const echo = tools.find((tool) => tool.name === "echo");
    expect(echo?.inputSchema).toMatchObject({ type: "object", properties: { message: { type: "string" } } });
    const result = await client.callTool("echo", { message: "hi" });
    expect(result).toEqual({ content: [{ type: "text", text: "Echo: hi" }], isError: false });
  });

  it("applies enable_tools and disable_tools to listing and calling", async () => {
    const allowOnly = await connect(everythingMcp("allow", { enable_tools: ["echo", "get-sum"] }));
    expect((await allowOnly.listTools()).map((tool) => tool.name).sort()).toEqual(["echo", "get-sum"]);
    await expect(allowOnly.callTool("get-env", {})).rejects.toMatchObject({ code: "FORBIDDEN" });

    const deny = await connect(everythingMcp("deny", { disable_tools: ["echo"] }));
    const names = (await deny.listTools()).map((tool) => tool.name);
    expect(names).not.toContain("echo");
    expect(names).toContain("get-sum");
    await expect(deny.callTool("echo", { message: "x" })).rejects.toMatchObject({ code: "FORBIDDEN" });
  });

  it("times out a slow call after execution_timeout and keeps the session usable", async () => {
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

  it("aborts a call through the caller's signal", async () => {
    const client = shared;
    const controller = new AbortController();
    const call = client.callTool(
      "trigger-long-running-operation",
      { duration: 30, steps: 3 },
      { signal: controller.signal },
    );
    controller.abort();
    await expect(call).rejects.toBeInstanceOf(AppError);
  });

  it("maps upstream tool errors to isError results and bad arguments to BAD_REQUEST", async () => {
    const client = shared;
    const result = await client.callTool("get-sum", { a: "not a number" }).catch((e: unknown) => e);
    // server-everything validates with zod: either an isError result or an InvalidParams protocol error.
    if (result instanceof AppError) expect(result.code).toBe("BAD_REQUEST");
    else expect(result).toMatchObject({ isError: true });
  });

  it("reports a server that exits before it answers as UNPROCESSABLE naming its exit code and stderr", async () => {
    const declaration = ZMcpDeclaration.parse({
      name: "broken",
      is_stateful: true,
      mcp_config: {
        type: "stdio_mcp",
        command: process.execPath,
        args: ["-e", "console.error('boom'); process.exit(3)"],
      },
    });
    const error = await connector.connect(declaration, scope).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).isRetryable).toBe(false);
    expect(error).toMatchObject({
      code: "UNPROCESSABLE",
      details: { reason: "server_exited", exitCode: 3, signal: null },
    });
    expect((error as AppError).details?.stderr).toContain("boom");
    expect((error as AppError).userMessage).toBe(
      "The MCP server 'broken' exited with code 3 before it answered; its stderr ends: boom",
    );
  });

  it("reports a server that exits while listing its tools (after its handshake) as UNPROCESSABLE too", async () => {
    // Answers `initialize` like a real server, then dies on the first tools/list: what a server that
    // loads a missing dependency lazily does.
    const server = `
      const rl = require("node:readline").createInterface({ input: process.stdin });
      rl.on("line", (line) => {
        const message = JSON.parse(line);
        if (message.method === "initialize") {
          process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: {
            protocolVersion: message.params.protocolVersion, capabilities: { tools: {} },
            serverInfo: { name: "late-crash", version: "1.0.0" } } }) + "\\n");
        } else if (message.method === "tools/list") {
          console.error("Cannot find module 'left-pad'");
          process.exit(4);
        }
      });`;
    const declaration = ZMcpDeclaration.parse({
      name: "late",
      is_stateful: true,
      mcp_config: { type: "stdio_mcp", command: process.execPath, args: ["-e", server] },
    });
    const client = await connect(declaration);
    const error = await client.listTools().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).isRetryable).toBe(false);
    expect(error).toMatchObject({
      code: "UNPROCESSABLE",
      details: { reason: "server_exited", phase: "list", exitCode: 4 },
    });
    expect((error as AppError).userMessage).toBe(
      "The MCP server 'late' exited with code 4 while listing its tools; its stderr ends: Cannot find module 'left-pad'",
    );
  });

  it("reports a command that cannot be spawned as UNPROCESSABLE, without the host path in the user message", async () => {
    const declaration = ZMcpDeclaration.parse({
      name: "ghost",
      is_stateful: true,
      mcp_config: { type: "stdio_mcp", command: "/nonexistent/berth-mcp-server" },
    });
    const error = await connector.connect(declaration, scope).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: "UNPROCESSABLE", details: { reason: "ENOENT" } });
    expect((error as AppError).userMessage).toBe(
      "The MCP server 'ghost' could not be started: its command was not found.",
    );
  });

  it("close() is idempotent and makes later calls fail with UNAVAILABLE", async () => {
    const client = await connect(everythingMcp("closing"));
    await client.close();
    await client.close();
    expect(client.isConnected).toBe(false);
    await expect(client.callTool("echo", { message: "x" })).rejects.toMatchObject({ code: "UNAVAILABLE" });
  });
});

describe("LocalMcpConnector over stdio (server-filesystem from npm)", { timeout: 120_000 }, () => {
  it("reads a file through the filesystem server", async () => {
    const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-fs-mcp-")));
    await fs.writeFile(path.join(root, "hello.txt"), "hello from berth");
    try {
      const client = await connect(filesystemMcp("fs", root));
      const names = (await client.listTools()).map((tool) => tool.name);
      expect(names).toContain("read_text_file");
      const result = await client.callTool("read_text_file", { path: path.join(root, "hello.txt") });
      expect(JSON.stringify(result.content)).toContain("hello from berth");
    } finally {
      await fs.rm(root, { recursive: true, force: true });
    }
  });
});

describe(
  "LocalMcpConnector over streamable HTTP (SDK McpServer on 127.0.0.1:0)",
  { timeout: 120_000 },
  () => {
    let server: TestHttpMcpServer;
    beforeAll(async () => {
      server = await startHttpMcpServer();
    });
    afterAll(async () => {
      await server.close();
    });

    it("keeps one session for a stateful declaration and terminates it on close", async () => {
      const before = { opened: server.sessionsOpened, closed: server.sessionsClosed };
      const client = await connect(httpMcp("http-stateful", server.url, true));
      expect((await client.listTools()).map((tool) => tool.name).sort()).toEqual(["echo", "wait"]);
      expect(await client.callTool("echo", { message: "a" })).toMatchObject({
        content: [{ text: "Echo: a" }],
      });
      expect(await client.callTool("echo", { message: "b" })).toMatchObject({
        content: [{ text: "Echo: b" }],
      });
      expect(server.sessionsOpened - before.opened).toBe(1);
      await client.close();
      expect(server.sessionsClosed - before.closed).toBe(1);
    });

    it("opens and terminates a temporary session per request for a stateless declaration", async () => {
      const before = { opened: server.sessionsOpened, closed: server.sessionsClosed };
      const client = await connect(httpMcp("http-stateless", server.url, false));
      expect(server.sessionsOpened - before.opened).toBe(0);
      await client.listTools();
      await client.callTool("echo", { message: "x" });
      expect(server.sessionsOpened - before.opened).toBe(2);
      expect(server.sessionsClosed - before.closed).toBe(2);
    });

    it("closing a stateless client ends its in-flight temporary session", async () => {
      const before = { opened: server.sessionsOpened, closed: server.sessionsClosed };
      const client = await connect(httpMcp("http-stateless-closing", server.url, false));
      const call = client.callTool("wait", {}).catch((e: unknown) => e);
      await server.waitStarted();
      await client.close();
      expect(await call).toBeInstanceOf(AppError);
      expect(server.sessionsOpened - before.opened).toBe(1);
      expect(server.sessionsClosed - before.closed).toBe(1);
      server.releaseWaits();
    });

    it("reports an unreachable server as UNAVAILABLE", async () => {
      const client = await connect(httpMcp("nowhere", "http://127.0.0.1:9/mcp", false));
      await expect(client.listTools()).rejects.toMatchObject({ code: "UNAVAILABLE" });
    });

    it("speaks legacy SSE when the URL path ends in /sse (stateful and stateless)", async () => {
      const sse = await startSseMcpServer();
      try {
        const stateful = await connect(httpMcp("sse-stateful", sse.url, true));
        expect((await stateful.listTools()).map((tool) => tool.name)).toEqual(["echo"]);
        expect(await stateful.callTool("echo", { message: "a" })).toMatchObject({
          content: [{ text: "SSE echo: a" }],
        });
        const stateless = await connect(httpMcp("sse-stateless", sse.url, false));
        expect(await stateless.callTool("echo", { message: "b" })).toMatchObject({
          content: [{ text: "SSE echo: b" }],
        });
      } finally {
        await Promise.all(opened.splice(0).map((client) => client.close()));
        await sse.close();
      }
    });

    it("selects the transport from the URL path like the reference", () => {
      expect(selectHttpTransport("http://h/sse")).toBe("sse");
      expect(selectHttpTransport("http://h/a/messages/?x=1")).toBe("sse");
      expect(selectHttpTransport("http://h/mcp")).toBe("streamable-http");
      expect(selectHttpTransport("http://h/sse/more")).toBe("streamable-http");
    });
  },
);
