import { z } from "zod";
import type { CancelSignal } from "./cancel-signal";

/**
 * MCP declarations, in the reference's `.mcp` v2 JSON shape (agentscope-spec.md §1.3): field names and
 * order match `MCPClient.model_dump(mode="json")` so files round-trip with the reference system.
 */
const ZStdioMcpConfig = z.object({
  type: z.literal("stdio_mcp"),
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  env: z.record(z.string(), z.string()).nullable().default(null),
  cwd: z.string().nullable().default(null),
  encoding_error_handler: z.string().default("strict"),
});

const ZHttpMcpConfig = z.object({
  type: z.literal("http_mcp"),
  url: z.url(),
  headers: z.record(z.string(), z.string()).nullable().default(null),
  timeout: z.number().positive().default(30),
});

const ZMcpConfig = z.discriminatedUnion("type", [ZStdioMcpConfig, ZHttpMcpConfig]);

export const ZMcpDeclaration = z
  .object({
    name: z.string().regex(/^[a-zA-Z0-9_-]+$/, "MCP names may contain only letters, digits, '_' and '-'"),
    is_stateful: z.boolean(),
    mcp_config: ZMcpConfig,
    enable_tools: z.array(z.string()).nullable().default(null),
    disable_tools: z.array(z.string()).nullable().default(null),
    /** Seconds; null means the workspace default. */
    execution_timeout: z.number().positive().nullable().default(null),
  })
  .superRefine((value, ctx) => {
    if (value.mcp_config.type === "stdio_mcp" && !value.is_stateful) {
      ctx.addIssue({ code: "custom", message: "A stdio MCP must be stateful", path: ["is_stateful"] });
    }
    const enabled = new Set(value.enable_tools ?? []);
    const overlap = (value.disable_tools ?? []).filter((tool) => enabled.has(tool));
    if (overlap.length > 0) {
      ctx.addIssue({
        code: "custom",
        message: `enable_tools and disable_tools overlap: ${overlap.join(", ")}`,
        path: ["disable_tools"],
      });
    }
  });

export type TMcpDeclaration = z.infer<typeof ZMcpDeclaration>;
export type TMcpConfig = z.infer<typeof ZMcpConfig>;

/** An MCP scope: every MCP operation is keyed by (agent id, session id); "" is the legacy scope. */
export type McpScope = { agentId: string; sessionId: string };

/** An upstream MCP tool as listed by `tools/list` (after allow/deny filtering). */
export type McpToolInfo = {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations?: { readOnlyHint?: boolean; destructiveHint?: boolean } | undefined;
};

/** The result of one tool call, in MCP's CallToolResult shape. */
export type McpToolResult = {
  content: Array<Record<string, unknown> & { type: string }>;
  isError: boolean;
  structuredContent?: Record<string, unknown> | undefined;
};

/**
 * A live MCP client. Local SDK clients (stdio / streamable HTTP / SSE on the host) and gateway clients
 * (MCP servers running inside a sandbox) both implement it, so the toolkit and the chat service cannot
 * tell them apart.
 */
export interface LiveMcpClient {
  readonly declaration: TMcpDeclaration;
  readonly scope: McpScope;
  /** True while a stateful session is open (always true for stateless clients once registered). */
  readonly isConnected: boolean;
  listTools(): Promise<McpToolInfo[]>;
  callTool(
    tool: string,
    args: Record<string, unknown>,
    options?: { timeoutMs?: number; signal?: CancelSignal },
  ): Promise<McpToolResult>;
  /** Closes the session (stateful) or unregisters it (gateway); idempotent, never throws. */
  close(): Promise<void>;
  /**
   * Lets go of this process's handle and leaves the server running for the other processes that share it
   * (a sandbox's gateway serves every host process attached to it). Absent: the same as `close`.
   */
  release?(): Promise<void>;
}

/**
 * How a workspace turns a declaration into a live client: the local connector spawns/dials MCP servers on
 * the host; the gateway connector registers them with the in-sandbox gateway.
 */
export interface McpConnector {
  connect(declaration: TMcpDeclaration, scope: McpScope): Promise<LiveMcpClient>;
}

/**
 * The structured logger the MCP and skills code writes to: the pino-compatible subset `(details, message)`,
 * so a pino child logger can be passed straight in.
 */
export type EngineLogger = {
  warn(details: Record<string, unknown>, message: string): void;
  info?(details: Record<string, unknown>, message: string): void;
  debug?(details: Record<string, unknown>, message: string): void;
};

/** A logger that drops everything (the default when none is configured). */
export const silentLogger: EngineLogger = { warn: () => undefined };

/**
 * One MCP tool as handed to an LLM toolkit: `mcp__<mcp>__<tool>`, its JSON-schema input and a call function.
 * `call` never throws: transport errors and timeouts come back as `isError` results carrying the
 * AppError's user message, so a chat loop can show them to the model.
 */
export type McpToolDescriptor = {
  name: string;
  mcpName: string;
  toolName: string;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations?: McpToolInfo["annotations"];
  call(args: Record<string, unknown>, options?: { signal?: AbortSignal }): Promise<McpToolResult>;
};
