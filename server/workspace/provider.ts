import type { McpNetworkPolicy } from "./mcp/mcp-network-policy";
import type { BackendKind, WorkspaceBackend } from "@/server/workspace/backend/port";
import type { IsolationPolicy } from "@/server/workspace/manager/isolation";
import type { McpConnector } from "@/server/workspace/mcp/types";

/** Who a workspace belongs to and under which id: everything a provider may use to place and name it. */
export type WorkspaceSpec = {
  workspaceId: string;
  tenantId: string;
  userId: string;
  /** The agent whose request created the workspace ("" when none); informational for naming/labels. */
  agentId: string;
  isolation: IsolationPolicy;
};

/**
 * The provider port: how a Workspace gets (and gives back) the machine it runs on. LocalBackendProvider makes
 * a host directory; the Docker provider creates or reattaches a container; E2B/Kubernetes follow. Provision
 * must be idempotent per spec ("create or get"): the same spec after a restart reattaches the same data.
 */
export interface BackendProvider {
  readonly kind: BackendKind;
  /** True when data survives `teardown({ purge: false })` and a later `provision` of the same spec. */
  readonly persistent: boolean;
  /** Creates or reattaches the workspace's machine and returns a ready backend. */
  provision(spec: WorkspaceSpec, options?: { signal?: AbortSignal }): Promise<WorkspaceBackend>;
  /** Cheap health check (the container still runs, the sandbox has not expired). Never throws. */
  isAlive(backend: WorkspaceBackend): Promise<boolean>;
  /**
   * Releases the machine: stops/pauses it; with `purge`, deletes its data too (used when provisioning
   * failed half-way or the workspace is deleted). Idempotent, safe on a dead backend.
   */
  teardown(backend: WorkspaceBackend, options: { purge: boolean }): Promise<void>;
  /**
   * How MCP declarations become live clients for this backend: sandboxed providers route through their
   * in-sandbox gateway. Omitted: MCP servers run on the host (LocalMcpConnector), which only the local
   * backend should do.
   */
  createMcpConnector?(
    backend: WorkspaceBackend,
    spec: WorkspaceSpec,
    /** Where HTTP/SSE servers dialled from the HOST may point (mcp-network-policy.ts). */
    options?: { network: McpNetworkPolicy },
  ): Promise<McpConnector>;
}
