import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";
import type { McpNetworkPolicy } from "@/server/workspace/mcp/mcp-network-policy";
import type { LiveMcpClient, McpConnector, McpScope, TMcpDeclaration } from "@/server/workspace/mcp/types";
import type { BubblewrapMachine } from "./bubblewrap-machine";

/**
 * Where a sandboxed workspace's MCP declarations run. A stdio server is a program the member chose: it
 * runs inside the workspace's sandbox, as a child of the in-sandbox gateway. An HTTP/SSE server is a
 * remote endpoint: Berth dials it from the host, as before (the sandbox has no network, and what an
 * endpoint may be is the declaration policy's business, not the sandbox's).
 */
export class SandboxMcpConnector implements McpConnector {
  private readonly remote: LocalMcpConnector;

  constructor(
    private readonly backend: BubblewrapMachine,
    network: McpNetworkPolicy,
  ) {
    // Dialled from the host: every connection is checked against the operator's MCP network policy.
    this.remote = new LocalMcpConnector({
      defaultCallTimeoutMs: backend.options.config.gateway.callTimeoutMs,
      network,
    });
  }

  async connect(declaration: TMcpDeclaration, scope: McpScope): Promise<LiveMcpClient> {
    if (declaration.mcp_config.type !== "stdio_mcp") return this.remote.connect(declaration, scope);
    const gateway = await this.backend.mcpGateway();
    return gateway.connector.connect(declaration, scope);
  }
}
