import { AppError, toAppError } from "@/server/shared/errors";
import type { CancelSignal } from "@/server/workspace/mcp/cancel-signal";
import { MCP_NOT_REGISTERED } from "../gateway-protocol";
import type {
  LiveMcpClient,
  McpConnector,
  McpScope,
  McpToolInfo,
  McpToolResult,
  TMcpDeclaration,
} from "@/server/workspace/mcp/types";

/**
 * The gateway's state: MCP registrations keyed per (agent, session) scope, so a stateful server (a
 * browser, a REPL) never shares a session across scopes. The upstream clients come from the same
 * connector the host uses for local MCPs, so filtering, timeouts and error mapping are identical.
 * Operations on one (scope, name) are serialised by a keyed lock; different MCPs and scopes proceed in
 * parallel (the reference held one global lock).
 */
export class ScopeRegistry {
  private readonly scopes = new Map<string, Map<string, LiveMcpClient>>();
  private readonly locks = new Map<string, Promise<unknown>>();

  constructor(private readonly connector: McpConnector) {}

  list(scope: McpScope): TMcpDeclaration[] {
    return [...(this.scopes.get(scopeKey(scope))?.values() ?? [])].map((client) => client.declaration);
  }

  async add(scope: McpScope, declaration: TMcpDeclaration): Promise<void> {
    await this.withLock(scope, declaration.name, async () => {
      if (this.find(scope, declaration.name)) {
        throw new AppError("CONFLICT", `'${declaration.name}' already exists for ${describe(scope)}`);
      }
      const client = await this.connector.connect(declaration, scope);
      try {
        // List once so a broken declaration fails here, not at the first tool call.
        await client.listTools();
      } catch (error) {
        await client.close();
        throw toAppError(error);
      }
      const entries = this.scopes.get(scopeKey(scope)) ?? new Map<string, LiveMcpClient>();
      entries.set(declaration.name, client);
      this.scopes.set(scopeKey(scope), entries);
    });
  }

  /** Unregisters stateful AND stateless MCPs (the reference's host skipped stateless ones, #2773). */
  async remove(scope: McpScope, name: string): Promise<void> {
    await this.withLock(scope, name, async () => {
      const client = this.require(scope, name);
      const entries = this.scopes.get(scopeKey(scope));
      entries?.delete(name);
      if (entries?.size === 0) this.scopes.delete(scopeKey(scope));
      await client.close();
    });
  }

  async listTools(scope: McpScope, name: string): Promise<McpToolInfo[]> {
    return (await this.live(scope, name)).listTools();
  }

  async callTool(
    scope: McpScope,
    name: string,
    tool: string,
    args: Record<string, unknown>,
    options: { timeoutMs?: number | undefined; signal: CancelSignal },
  ): Promise<McpToolResult> {
    const client = await this.live(scope, name);
    return client.callTool(tool, args, {
      signal: options.signal,
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    });
  }

  async closeAll(): Promise<void> {
    const clients = [...this.scopes.values()].flatMap((entries) => [...entries.values()]);
    this.scopes.clear();
    await Promise.all(clients.map((client) => client.close()));
  }

  private find(scope: McpScope, name: string): LiveMcpClient | undefined {
    return this.scopes.get(scopeKey(scope))?.get(name);
  }

  private require(scope: McpScope, name: string): LiveMcpClient {
    const client = this.find(scope, name);
    if (!client) {
      throw new AppError("NOT_FOUND", `'${name}' not found for ${describe(scope)}`, {
        details: { reason: MCP_NOT_REGISTERED, mcp: name },
      });
    }
    return client;
  }

  /** The registered client, reconnected first when its stateful server died (crash, OOM kill). */
  private async live(scope: McpScope, name: string): Promise<LiveMcpClient> {
    const client = this.require(scope, name);
    if (client.isConnected) return client;
    return this.withLock(scope, name, async () => {
      const current = this.require(scope, name);
      if (current.isConnected) return current;
      await current.close();
      const fresh = await this.connector.connect(current.declaration, scope);
      this.scopes.get(scopeKey(scope))?.set(name, fresh);
      return fresh;
    });
  }

  private async withLock<T>(scope: McpScope, name: string, task: () => Promise<T>): Promise<T> {
    const key = `${scopeKey(scope)}\0${name}`;
    const previous = this.locks.get(key) ?? Promise.resolve();
    const run = previous.then(task, task);
    const settled = run.catch(() => undefined);
    this.locks.set(key, settled);
    try {
      return await run;
    } finally {
      if (this.locks.get(key) === settled) this.locks.delete(key);
    }
  }
}

function scopeKey(scope: McpScope): string {
  return `${scope.agentId}\0${scope.sessionId}`;
}

function describe(scope: McpScope): string {
  return `agent='${scope.agentId}' session='${scope.sessionId}'`;
}
