import { isAppError } from "@/server/shared/errors";
import type {
  LiveMcpClient,
  McpConnector,
  McpScope,
  McpToolInfo,
  McpToolResult,
  TMcpDeclaration,
} from "@/server/workspace/mcp/types";
import type { GatewayClient } from "./gateway-client";

export type GatewayConnectorOptions = {
  /** Tool-call timeout when neither the call nor the declaration sets one. Default 30 s (the reference's). */
  defaultCallTimeoutMs?: number;
};

/**
 * Connects MCP declarations through the in-sandbox gateway: the MCP servers run inside the sandbox,
 * the host only holds a handle. The clients it returns implement the same port as local clients.
 */
export class GatewayConnector implements McpConnector {
  private readonly defaultCallTimeoutMs: number;

  constructor(
    private readonly gateway: GatewayClient,
    options: GatewayConnectorOptions = {},
  ) {
    this.defaultCallTimeoutMs = options.defaultCallTimeoutMs ?? 30_000;
  }

  async connect(declaration: TMcpDeclaration, scope: McpScope): Promise<LiveMcpClient> {
    try {
      await this.gateway.addMcp(scope, declaration);
    } catch (error) {
      if (!isAppError(error) || error.code !== "CONFLICT") throw error;
      // The gateway still holds a registration the host lost track of (e.g. an earlier close failed):
      // replace it, so the caller gets a fresh session with the declaration it asked for.
      await this.gateway.removeMcp(scope, declaration.name).catch(() => undefined);
      await this.gateway.addMcp(scope, declaration);
    }
    return new GatewayMcpClient(this.gateway, declaration, scope, this.defaultCallTimeoutMs);
  }
}

/** A live MCP client whose server runs inside the sandbox, reached through the gateway. */
export class GatewayMcpClient implements LiveMcpClient {
  private connected = true;

  constructor(
    private readonly gateway: GatewayClient,
    readonly declaration: TMcpDeclaration,
    readonly scope: McpScope,
    private readonly defaultCallTimeoutMs: number,
  ) {}

  get isConnected(): boolean {
    return this.connected;
  }

  listTools(): Promise<McpToolInfo[]> {
    return this.gateway.listTools(this.scope, this.declaration.name);
  }

  callTool(
    tool: string,
    args: Record<string, unknown>,
    options: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<McpToolResult> {
    const declared = this.declaration.execution_timeout;
    const timeoutMs =
      options.timeoutMs ?? (declared !== null ? declared * 1000 : null) ?? this.defaultCallTimeoutMs;
    return this.gateway.callTool(this.scope, this.declaration.name, tool, args, {
      timeoutMs,
      signal: options.signal,
    });
  }

  /** Unregisters from the gateway: stateful sessions are closed there, stateless entries dropped. */
  async close(): Promise<void> {
    if (!this.connected) return;
    this.connected = false;
    await this.gateway.removeMcp(this.scope, this.declaration.name).catch(() => undefined);
  }
}
