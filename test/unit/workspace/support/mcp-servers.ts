import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import type { LiveMcpClient, McpConnector, McpScope, TMcpDeclaration } from "@/server/workspace/mcp/types";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";

const EVERYTHING_ENTRY = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const FILESYSTEM_ENTRY = path.resolve("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");

/** A stdio declaration of the real `@modelcontextprotocol/server-everything` from npm. */
export function everythingMcp(name: string, overrides: Partial<TMcpDeclaration> = {}): TMcpDeclaration {
  return ZMcpDeclaration.parse({
    name,
    is_stateful: true,
    mcp_config: { type: "stdio_mcp", command: process.execPath, args: [EVERYTHING_ENTRY, "stdio"] },
    ...overrides,
  });
}

/** A stdio declaration of the real `@modelcontextprotocol/server-filesystem`, rooted at `root`. */
export function filesystemMcp(name: string, root: string): TMcpDeclaration {
  return ZMcpDeclaration.parse({
    name,
    is_stateful: true,
    mcp_config: { type: "stdio_mcp", command: process.execPath, args: [FILESYSTEM_ENTRY, root] },
  });
}

export function httpMcp(name: string, url: string, isStateful: boolean): TMcpDeclaration {
  return ZMcpDeclaration.parse({ name, is_stateful: isStateful, mcp_config: { type: "http_mcp", url } });
}

export type TestHttpMcpServer = {
  url: string;
  /** Sessions opened (initialize) and terminated (DELETE) so far. */
  readonly sessionsOpened: number;
  readonly sessionsClosed: number;
  /** Resolves once a `wait` tool call has started on the server. */
  waitStarted(): Promise<void>;
  /** Lets every pending `wait` tool call finish. */
  releaseWaits(): void;
  close(): Promise<void>;
};

/**
 * A real streamable-HTTP MCP server (the SDK's McpServer) on 127.0.0.1:0 with two tools: `echo` and `wait`
 * (which returns only when released or cancelled, so tests control timing without sleeps).
 */
export async function startHttpMcpServer(): Promise<TestHttpMcpServer> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  let sessionsOpened = 0;
  let sessionsClosed = 0;
  let release: () => void = () => undefined;
  let released = new Promise<void>((resolve) => (release = resolve));
  let notifyStarted: () => void = () => undefined;
  let started = new Promise<void>((resolve) => (notifyStarted = resolve));

  const makeServer = () => {
    const server = new McpServer({ name: "berth-test-http", version: "1.0.0" });
    server.registerTool(
      "echo",
      { description: "Echoes the message", inputSchema: { message: z.string() } },
      ({ message }) => ({ content: [{ type: "text", text: `Echo: ${message}` }] }),
    );
    server.registerTool("wait", { description: "Waits until released" }, async (extra) => {
      notifyStarted();
      await Promise.race([
        released,
        new Promise((resolve) => extra.signal.addEventListener("abort", resolve, { once: true })),
      ]);
      return { content: [{ type: "text", text: "done" }] };
    });
    return server;
  };

  const httpServer = http.createServer((req, res) => {
    void (async () => {
      const sessionId = req.headers["mcp-session-id"];
      const existing = typeof sessionId === "string" ? transports.get(sessionId) : undefined;
      if (existing) return existing.handleRequest(req, res);
      if (sessionId !== undefined || req.method !== "POST") {
        res.writeHead(404).end();
        return;
      }
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          sessionsOpened += 1;
          transports.set(id, transport);
        },
        onsessionclosed: (id) => {
          sessionsClosed += 1;
          transports.delete(id);
        },
      });
      await makeServer().connect(transport);
      await transport.handleRequest(req, res);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => httpServer.listen(0, "127.0.0.1", resolve));
  const { port } = httpServer.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/mcp`,
    get sessionsOpened() {
      return sessionsOpened;
    },
    get sessionsClosed() {
      return sessionsClosed;
    },
    waitStarted: () => started,
    releaseWaits: () => {
      release();
      released = new Promise<void>((resolve) => (release = resolve));
      started = new Promise<void>((resolve) => (notifyStarted = resolve));
    },
    close: async () => {
      release();
      await Promise.all([...transports.values()].map((transport) => transport.close()));
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
    },
  };
}

/**
 * A real legacy-SSE MCP server (the SDK's SSEServerTransport): GET /sse opens the stream, POST
 * /messages/?sessionId=… carries requests. One `echo` tool.
 */
export async function startSseMcpServer(): Promise<{ url: string; close(): Promise<void> }> {
  const transports = new Map<string, SSEServerTransport>();
  const httpServer = http.createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? "/", "http://localhost");
      if (req.method === "GET" && url.pathname === "/sse") {
        const transport = new SSEServerTransport("/messages/", res);
        transports.set(transport.sessionId, transport);
        res.on("close", () => transports.delete(transport.sessionId));
        const server = new McpServer({ name: "berth-test-sse", version: "1.0.0" });
        server.registerTool("echo", { inputSchema: { message: z.string() } }, ({ message }) => ({
          content: [{ type: "text", text: `SSE echo: ${message}` }],
        }));
        await server.connect(transport);
        return;
      }
      const transport = transports.get(url.searchParams.get("sessionId") ?? "");
      if (req.method === "POST" && url.pathname === "/messages/" && transport) {
        await transport.handlePostMessage(req, res);
        return;
      }
      res.writeHead(404).end();
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => httpServer.listen(0, "127.0.0.1", resolve));
  const { port } = httpServer.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/sse`,
    close: async () => {
      await Promise.all([...transports.values()].map((transport) => transport.close()));
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
    },
  };
}

/** Wraps a real connector and records what it connected and closed (a spy, not a fake server). */
export class RecordingConnector implements McpConnector {
  readonly connects: Array<{ name: string; scope: McpScope }> = [];
  readonly closes: Array<{ name: string; scope: McpScope }> = [];
  readonly clients: LiveMcpClient[] = [];

  constructor(private readonly inner: McpConnector) {}

  async connect(declaration: TMcpDeclaration, scope: McpScope): Promise<LiveMcpClient> {
    const client = await this.inner.connect(declaration, scope);
    this.connects.push({ name: declaration.name, scope });
    this.clients.push(client);
    const closes = this.closes;
    const recorded: LiveMcpClient = {
      declaration: client.declaration,
      scope: client.scope,
      get isConnected() {
        return client.isConnected;
      },
      listTools: () => client.listTools(),
      callTool: (tool, args, options) => client.callTool(tool, args, options),
      close: async () => {
        closes.push({ name: declaration.name, scope });
        await client.close();
      },
    };
    return recorded;
  }
}
