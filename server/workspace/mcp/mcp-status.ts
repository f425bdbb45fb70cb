import type { McpScope, TMcpDeclaration } from "@/server/workspace/mcp/types";

/**
 * What one declared MCP of a scope is doing in this process: `running` (connected), `failed` (its last
 * start or tool listing failed: `error` says why; the next list retries), `stopped` (not started yet, evicted
 * by the cap, or its session dropped).
 */
export type McpState = "running" | "failed" | "stopped";
export type McpStatus = {
  declaration: TMcpDeclaration;
  state: McpState;
  error: string | null;
  /** When `error` happened (epoch ms). */
  failedAt: number | null;
};

/** The scope an agent's sessions share: MCPs declared there apply to every session of the agent. */
export function agentScopeOf(scope: McpScope): McpScope {
  return { agentId: scope.agentId, sessionId: "" };
}

/** The last start or tool-listing failure per scope key and MCP name; the next success clears it. */
export class McpFailureLog {
  private readonly failures = new Map<string, Map<string, { error: string; at: number }>>();

  record(key: string, name: string, error: string): void {
    let byName = this.failures.get(key);
    if (!byName) {
      byName = new Map();
      this.failures.set(key, byName);
    }
    byName.set(name, { error, at: Date.now() });
  }

  clear(key: string, name?: string): void {
    if (name === undefined) {
      this.failures.delete(key);
      return;
    }
    const byName = this.failures.get(key);
    byName?.delete(name);
    if (byName?.size === 0) this.failures.delete(key);
  }

  get(key: string, name: string): { error: string; at: number } | null {
    return this.failures.get(key)?.get(name) ?? null;
  }
}
