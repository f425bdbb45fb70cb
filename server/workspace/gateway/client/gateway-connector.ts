import { isDeepStrictEqual } from "node:util";
import { AppError, isAppError } from "@/server/shared/errors";
import type { CancelSignal } from "@/server/workspace/mcp/cancel-signal";
import type {
  LiveMcpClient,
  McpConnector,
  McpScope,
  McpToolInfo,
  McpToolResult,
  TMcpDeclaration,
} from "@/server/workspace/mcp/types";
import { MCP_NOT_REGISTERED } from "../gateway-protocol";
import type { GatewayClient } from "./gateway-client";

export type GatewayConnectorOptions = {
  /** Tool-call timeout when neither the call nor the declaration sets one. Default 30 s (the reference's). */
  defaultCallTimeoutMs?: number;
};

/**
 * Connects MCP declarations through the in-sandbox gateway: the MCP servers run inside the sandbox,
 * the host only holds a handle. The clients it returns implement the same port as local clients.
 *
 * A gateway's servers belong to the sandbox, not to one host process: every API replica and worker
 * attached to the workspace reaches the same server for a (scope, name). So connecting adopts a server
 * already registered with the same declaration (another process's, or this process's before a restart),
 * and a stateful session keeps its state from one replica's turn to the next.
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
    await registerWithGateway(this.gateway, scope, declaration);
    return new GatewayMcpClient(this.gateway, declaration, scope, this.defaultCallTimeoutMs);
  }
}

/** Register, replace and adopt race with other processes doing the same: a few rounds settle them. */
const REGISTER_ATTEMPTS = 3;

/**
 * Makes the gateway hold `declaration` under its name in `scope`: registers it, or adopts the registration
 * already there when it is the same declaration, or replaces a different one (a registration the host lost
 * track of, or an edited declaration).
 */
async function registerWithGateway(
  gateway: GatewayClient,
  scope: McpScope,
  declaration: TMcpDeclaration,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await gateway.addMcp(scope, declaration);
      return;
    } catch (error) {
      if (!isAppError(error) || error.code !== "CONFLICT" || attempt === REGISTER_ATTEMPTS) throw error;
    }
    const registered = (await gateway.listMcps(scope)).find((entry) => entry.name === declaration.name);
    if (registered && sameDeclaration(registered, declaration)) return;
    if (registered) {
      await gateway.removeMcp(scope, declaration.name).catch((error: unknown) => {
        if (!isNotRegistered(error)) throw error; // removed concurrently: fine, add again
      });
    }
  }
}

/** Equal as the gateway sees them: compared as JSON, so an explicit `undefined` and an absent key match. */
function sameDeclaration(a: TMcpDeclaration, b: TMcpDeclaration): boolean {
  return isDeepStrictEqual(JSON.parse(JSON.stringify(a)), JSON.parse(JSON.stringify(b)));
}

function isNotRegistered(error: unknown): boolean {
  return isAppError(error) && error.code === "NOT_FOUND" && error.details?.reason === MCP_NOT_REGISTERED;
}

/** A live MCP client whose server runs inside the sandbox, reached through the gateway. */
class GatewayMcpClient implements LiveMcpClient {
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
    return this.registered(() => this.gateway.listTools(this.scope, this.declaration.name));
  }

  callTool(
    tool: string,
    args: Record<string, unknown>,
    options: { timeoutMs?: number; signal?: CancelSignal } = {},
  ): Promise<McpToolResult> {
    const declared = this.declaration.execution_timeout;
    const timeoutMs =
      options.timeoutMs ?? (declared !== null ? declared * 1000 : null) ?? this.defaultCallTimeoutMs;
    return this.registered(() =>
      this.gateway.callTool(this.scope, this.declaration.name, tool, args, {
        timeoutMs,
        signal: options.signal,
      }),
    );
  }

  /** Unregisters from the gateway: stateful sessions are closed there, stateless entries dropped. */
  async close(): Promise<void> {
    if (!this.connected) return;
    this.connected = false;
    await this.gateway.removeMcp(this.scope, this.declaration.name).catch(() => undefined);
  }

  /** Forgets this handle; the server stays registered for the other processes attached to the sandbox. */
  release(): Promise<void> {
    this.connected = false;
    return Promise.resolve();
  }

  /**
   * Runs a request against this MCP's registration. When another process closed it meanwhile (its LRU
   * evicted it, its workspace was reset), the gateway answers "not registered" before doing anything, so
   * the declaration is registered again and the request sent once more.
   */
  private async registered<T>(request: () => Promise<T>): Promise<T> {
    if (!this.connected) {
      throw new AppError("UNAVAILABLE", `MCP ${this.declaration.name} is closed`, {
        details: { mcp: this.declaration.name },
      });
    }
    try {
      return await request();
    } catch (error) {
      if (!isNotRegistered(error)) throw error;
      await registerWithGateway(this.gateway, this.scope, this.declaration);
      return request();
    }
  }
}
