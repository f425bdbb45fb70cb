import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FetchLike, Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { AppError } from "@/server/shared/errors";
import { toAbortSignal, type CancelSignal } from "@/server/workspace/mcp/cancel-signal";
import { mcpServerExited, toMcpAppError } from "@/server/workspace/mcp/mcp-errors";
import { createMcpAddressGuard, type McpNetworkPolicy } from "@/server/workspace/mcp/mcp-network-policy";
import { filterMcpTools, isMcpToolAllowed } from "@/server/workspace/mcp/tool-filter";
import { StdioTransport } from "@/server/workspace/mcp/stdio-transport";
import { relayable, ToolCallRelay } from "@/server/workspace/mcp/tool-call-relay";
import {
  silentLogger,
  type EngineLogger,
  type LiveMcpClient,
  type McpConnector,
  type McpScope,
  type McpToolInfo,
  type McpToolResult,
  type TMcpDeclaration,
} from "@/server/workspace/mcp/types";

export type LocalMcpConnectorOptions = {
  /** Per-call timeout for declarations whose `execution_timeout` is null. Default 120 000 ms. */
  defaultCallTimeoutMs?: number;
  /** Bound on spawning a stdio server plus the initialize handshake. Default 30 000 ms. */
  connectTimeoutMs?: number;
  /** Working directory for stdio servers whose declaration has `cwd: null` (e.g. the workspace workdir). */
  defaultCwd?: string;
  /** Name/version Berth announces in the MCP initialize handshake. */
  clientInfo?: { name: string; version: string };
  logger?: EngineLogger;
  /**
   * Where HTTP/SSE servers may be dialled from this process (mcp-network-policy.ts); checked in every
   * connection's DNS lookup. Unset → anywhere: only for connectors whose network is already a sandbox's
   * (the in-container gateway). The host-side Workspace always sets it.
   */
  network?: McpNetworkPolicy;
  /**
   * Tool calls of stateful stdio sessions skip the SDK client's per-call work (tool-call-relay.ts). Only
   * for a caller that validates results itself: the in-sandbox gateway, whose host checks every answer.
   */
  relayToolCalls?: boolean;
};

type ResolvedOptions = Required<
  Omit<LocalMcpConnectorOptions, "defaultCwd" | "network" | "relayToolCalls">
> & {
  relayToolCalls: boolean;
  defaultCwd?: string;
  guardedFetch?: FetchLike;
};

const STDERR_TAIL_BYTES = 4096;
/** How long a failed handshake waits for the server's exit to learn its code (it is usually already gone). */
const EXIT_WAIT_MS = 1_000;

/**
 * Connects MCP servers from the host with the official SDK: stdio servers are spawned as child processes,
 * HTTP servers are dialled over streamable HTTP or SSE. Used by the local backend; sandboxed backends use
 * the gateway connector instead.
 */
export class LocalMcpConnector implements McpConnector {
  private readonly options: ResolvedOptions;

  constructor(options: LocalMcpConnectorOptions = {}) {
    this.options = {
      defaultCallTimeoutMs: options.defaultCallTimeoutMs ?? 120_000,
      connectTimeoutMs: options.connectTimeoutMs ?? 30_000,
      clientInfo: options.clientInfo ?? { name: "berth", version: "0.1.0" },
      logger: options.logger ?? silentLogger,
      relayToolCalls: options.relayToolCalls ?? false,
      ...(options.defaultCwd === undefined ? {} : { defaultCwd: options.defaultCwd }),
      ...(options.network ? { guardedFetch: createMcpAddressGuard(options.network).fetch } : {}),
    };
  }

  /** Stateful declarations open their session here; stateless ones open a short session per request. */
  async connect(declaration: TMcpDeclaration, scope: McpScope): Promise<LiveMcpClient> {
    const client = new LocalMcpClient(declaration, scope, this.options);
    if (declaration.is_stateful) await client.open();
    return client;
  }
}

/** `/sse` or `/messages/` in the URL path selects the legacy SSE transport, as in the reference. */
export function selectHttpTransport(url: string): "sse" | "streamable-http" {
  const { pathname } = new URL(url);
  return pathname.endsWith("/sse") || pathname.includes("/messages/") ? "sse" : "streamable-http";
}

type Session = { client: Client; transport: Transport; stderrTail: () => string; relay?: ToolCallRelay };

class LocalMcpClient implements LiveMcpClient {
  private session: Session | null = null;
  private closed = false;
  private toolsCache: McpToolInfo[] | null = null;
  /** Tools of the open session the relay may call (see `relayable`), from its last tools/list. */
  private relayTools = new Set<string>();
  /** Temporary sessions of in-flight stateless requests, closed too when this client is closed. */
  private readonly transientSessions = new Set<Session>();

  constructor(
    readonly declaration: TMcpDeclaration,
    readonly scope: McpScope,
    private readonly options: ResolvedOptions,
  ) {}

  get isConnected(): boolean {
    if (this.closed) return false;
    return this.declaration.is_stateful ? this.session !== null : true;
  }

  async open(): Promise<void> {
    const session = await this.openSession();
    if (this.closed) {
      await closeSession(session);
      throw new AppError("UNAVAILABLE", `MCP ${this.declaration.name} was closed while connecting`);
    }
    session.client.onclose = () => {
      // A crashed server or a dropped stream: report disconnected so the registry reconnects it.
      if (this.session === session) this.session = null;
    };
    session.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      this.toolsCache = null;
      this.relayTools = new Set();
      return Promise.resolve();
    });
    this.session = session;
  }

  async listTools(): Promise<McpToolInfo[]> {
    if (this.toolsCache) return this.toolsCache;
    const relayTools = new Set<string>();
    const tools = await this.withSession("list", undefined, async (client, timeoutMs) => {
      const all: McpToolInfo[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined, { timeout: timeoutMs });
        for (const tool of page.tools) {
          if (relayable(tool)) relayTools.add(tool.name);
          all.push({
            name: tool.name,
            description: tool.description ?? "",
            inputSchema: tool.inputSchema,
            annotations: tool.annotations
              ? {
                  readOnlyHint: tool.annotations.readOnlyHint,
                  destructiveHint: tool.annotations.destructiveHint,
                }
              : undefined,
          });
        }
        cursor = page.nextCursor;
      } while (cursor);
      return filterMcpTools(this.declaration, all);
    });
    if (this.declaration.is_stateful) {
      this.toolsCache = tools;
      this.relayTools = relayTools;
    }
    return tools;
  }

  async callTool(
    tool: string,
    args: Record<string, unknown>,
    options: { timeoutMs?: number; signal?: CancelSignal } = {},
  ): Promise<McpToolResult> {
    if (!isMcpToolAllowed(this.declaration, tool)) {
      throw new AppError("FORBIDDEN", `Tool ${tool} is not enabled for MCP ${this.declaration.name}`, {
        details: { mcp: this.declaration.name, tool },
      });
    }
    const timeoutMs =
      options.timeoutMs ??
      (this.declaration.execution_timeout !== null
        ? this.declaration.execution_timeout * 1000
        : this.options.defaultCallTimeoutMs);
    return this.withSession(
      "call",
      tool,
      async (client, _timeoutMs, session) => {
        if (session?.relay && this.relayTools.has(tool)) {
          return normaliseResult(await session.relay.call(tool, args, { timeoutMs, signal: options.signal }));
        }
        // The SDK enforces the timeout, sends notifications/cancelled upstream and rejects the request.
        const result = await client.callTool({ name: tool, arguments: args }, undefined, {
          timeout: timeoutMs,
          ...(options.signal ? { signal: toAbortSignal(options.signal) } : {}),
        });
        return normaliseResult(result);
      },
      timeoutMs,
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    this.toolsCache = null;
    const sessions = [...this.transientSessions];
    this.transientSessions.clear();
    if (this.session) sessions.push(this.session);
    this.session = null;
    await Promise.all(sessions.map((session) => closeSession(session)));
  }

  /** Runs `work` on the open stateful session, or on a temporary one for stateless declarations. */
  private async withSession<T>(
    phase: "list" | "call",
    tool: string | undefined,
    work: (client: Client, timeoutMs: number, session?: Session) => Promise<T>,
    timeoutMs = this.requestTimeoutMs(),
  ): Promise<T> {
    const context = { mcp: this.declaration.name, phase, ...(tool ? { tool } : {}) };
    if (this.closed)
      throw new AppError("UNAVAILABLE", `MCP ${this.declaration.name} is closed`, { details: context });
    if (this.declaration.is_stateful) {
      const session = this.session;
      if (!session) {
        throw new AppError("UNAVAILABLE", `MCP ${this.declaration.name} is not connected`, {
          details: context,
        });
      }
      try {
        return await work(session.client, timeoutMs, session);
      } catch (error) {
        throw await this.listFailure(phase, session, error, context, timeoutMs);
      }
    }
    let session: Session | null = null;
    try {
      session = await this.openSession();
      this.transientSessions.add(session);
      if (this.closed) throw new AppError("UNAVAILABLE", `MCP ${this.declaration.name} is closed`);
      return await work(session.client, timeoutMs);
    } catch (error) {
      throw await this.listFailure(phase, session, error, context, timeoutMs);
    } finally {
      if (session && this.transientSessions.delete(session)) await closeSession(session);
    }
  }

  /**
   * A failed request as an AppError. A stdio server that ended on its own while listing its tools (right
   * after its handshake: a crash on start-up work, a missing dependency loaded late) is the declaration's
   * failure, as one that ends before the handshake: UNPROCESSABLE with its exit code and stderr, not the
   * retryable "connection closed" the SDK reports. Calls keep their mapping: a crash mid-call is reported
   * to the model as that tool's error, and the registry reconnects the server.
   */
  private async listFailure(
    phase: "list" | "call",
    session: Session | null,
    error: unknown,
    context: { mcp: string; phase: "list" | "call"; tool?: string },
    timeoutMs: number,
  ): Promise<AppError> {
    const appError = toMcpAppError(error, context, timeoutMs);
    if (phase !== "list" || !(session?.transport instanceof StdioTransport)) return appError;
    const exit = await session.transport.exitedOnItsOwn(appError.code === "TIMEOUT" ? 0 : EXIT_WAIT_MS);
    if (!exit) return appError;
    return mcpServerExited(this.declaration.name, exit, session.stderrTail().trim(), error, "list");
  }

  private requestTimeoutMs(): number {
    const config = this.declaration.mcp_config;
    return config.type === "http_mcp" ? config.timeout * 1000 : this.options.connectTimeoutMs;
  }

  private async openSession(): Promise<Session> {
    const config = this.declaration.mcp_config;
    let transport: Transport;
    let stdio: StdioTransport | undefined;
    let stderrTail = () => "";
    if (config.type === "stdio_mcp") {
      const cwd = config.cwd ?? this.options.defaultCwd;
      // stderr is piped, not inherited: an MCP server's chatter must not land in Berth's own stderr, and
      // a failed start should report what the server printed.
      stdio = new StdioTransport({
        command: config.command,
        args: config.args,
        ...(config.env ? { env: config.env } : {}),
        ...(cwd ? { cwd } : {}),
      });
      let tail = "";
      stdio.stderr.on("data", (chunk: Buffer) => {
        tail = (tail + chunk.toString("utf8")).slice(-STDERR_TAIL_BYTES);
      });
      stderrTail = () => tail;
      transport = stdio;
    } else {
      const url = new URL(config.url);
      const transportOptions = {
        ...(config.headers ? { requestInit: { headers: config.headers } } : {}),
        ...(this.options.guardedFetch ? { fetch: this.options.guardedFetch } : {}),
      };
      transport =
        selectHttpTransport(config.url) === "sse"
          ? new SSEClientTransport(url, transportOptions)
          : new StreamableHTTPClientTransport(url, transportOptions);
    }
    const client = new Client(this.options.clientInfo, { capabilities: {} });
    try {
      await client.connect(transport, { timeout: this.requestTimeoutMs() });
    } catch (error) {
      const appError = toMcpAppError(error, { mcp: this.declaration.name, phase: "connect" });
      // Asked before closing (which ends the server itself): did it end on its own? A handshake cut short
      // reaches us as the stream closing, at most moments before the exit.
      const exit = await stdio?.exitedOnItsOwn(appError.code === "TIMEOUT" ? 0 : EXIT_WAIT_MS);
      await closeSession({ client, transport, stderrTail });
      const stderr = stderrTail().trim();
      this.options.logger.warn(
        { mcp: this.declaration.name, scope: this.scope, error: appError.message, stderr, exit },
        "MCP server failed to start",
      );
      if (exit) throw mcpServerExited(this.declaration.name, exit, stderr, error);
      throw new AppError(appError.code, appError.message, {
        cause: error,
        userMessage: appError.userMessage,
        details: { ...appError.details, ...(stderr ? { stderr } : {}) },
      });
    }
    // Stateless sessions live for one request: nothing to relay there.
    const relay =
      this.options.relayToolCalls && transport instanceof StdioTransport && this.declaration.is_stateful
        ? new ToolCallRelay(transport)
        : undefined;
    return { client, transport, stderrTail, ...(relay ? { relay } : {}) };
  }
}

/** Ends a session for good: streamable-HTTP sessions are DELETEd so the server frees them too. */
async function closeSession(session: Session): Promise<void> {
  try {
    if (session.transport instanceof StreamableHTTPClientTransport && session.transport.sessionId) {
      await session.transport.terminateSession();
    }
  } catch {
    // Servers may refuse DELETE (405 is allowed by the spec); closing the stream below is what matters.
  }
  try {
    await session.client.close();
  } catch {
    // close() is best-effort by contract: the port promises it never throws.
  }
}

function normaliseResult(result: Record<string, unknown>): McpToolResult {
  const content = Array.isArray(result.content)
    ? (result.content as McpToolResult["content"])
    : // Pre-2024-11 servers answer with `toolResult` instead of `content`.
      [{ type: "text", text: JSON.stringify(result.toolResult ?? null) }];
  const structured = result.structuredContent;
  return {
    content,
    isError: result.isError === true,
    ...(structured && typeof structured === "object"
      ? { structuredContent: structured as Record<string, unknown> }
      : {}),
  };
}
