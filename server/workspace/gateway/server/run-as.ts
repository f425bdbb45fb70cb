import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { LiveMcpClient, McpConnector, McpScope, TMcpDeclaration } from "@/server/workspace/mcp/types";

/** The unprivileged user stdio MCP servers run as when the gateway itself runs as root. */
export type McpRunAs = { uid: number; gid: number; home: string };

/**
 * Wraps a connector so stdio servers start through `setpriv` as the workspace user: files they write
 * stay editable by the agent, and they cannot read the gateway's token from /proc (the gateway runs as
 * root, the agent and its MCP servers do not).
 */
export class RunAsConnector implements McpConnector {
  constructor(
    private readonly inner: McpConnector,
    private readonly runAs: McpRunAs,
  ) {}

  connect(declaration: TMcpDeclaration, scope: McpScope): Promise<LiveMcpClient> {
    return this.inner
      .connect(withRunAs(declaration, this.runAs), scope)
      .then((client) => new DeclarationView(client, declaration));
  }
}

function withRunAs(declaration: TMcpDeclaration, runAs: McpRunAs): TMcpDeclaration {
  const config = declaration.mcp_config;
  if (config.type !== "stdio_mcp") return declaration;
  return {
    ...declaration,
    mcp_config: {
      ...config,
      command: "setpriv",
      args: [
        `--reuid=${runAs.uid}`,
        `--regid=${runAs.gid}`,
        "--clear-groups",
        "--",
        config.command,
        ...config.args,
      ],
      env: { ...getDefaultEnvironment(), HOME: runAs.home, ...(config.env ?? {}) },
    },
  };
}

/** Reports the caller's declaration (not the setpriv-wrapped one) so GET /mcps round-trips. */
class DeclarationView implements LiveMcpClient {
  constructor(
    private readonly inner: LiveMcpClient,
    readonly declaration: TMcpDeclaration,
  ) {}

  get scope(): McpScope {
    return this.inner.scope;
  }

  get isConnected(): boolean {
    return this.inner.isConnected;
  }

  listTools() {
    return this.inner.listTools();
  }

  callTool(...args: Parameters<LiveMcpClient["callTool"]>) {
    return this.inner.callTool(...args);
  }

  close() {
    return this.inner.close();
  }
}
