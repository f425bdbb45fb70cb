import { AppError } from "@/server/shared/errors";
import type { WorkspaceBackend } from "@/server/workspace/backend/port";
import type { McpConnector } from "@/server/workspace/mcp/types";
import type { BackendProvider, WorkspaceSpec } from "@/server/workspace/backend/driver";
import type { DockerProvisionEvent, DockerWorkspaceHandle, DockerWorkspaceProvider } from "./docker-provider";

export type DockerBackendProviderOptions = {
  /** Provisioning progress (image build lines, container created/reattached, gateway ready) per workspace. */
  onProgress?: (spec: WorkspaceSpec, event: DockerProvisionEvent) => void;
  /** Passed to every open(): reuse a healthy gateway another process started (see DockerWorkspaceRequest). */
  reuseToken?: boolean;
};

/**
 * The engine's BackendProvider port over DockerWorkspaceProvider: what WorkspaceManager and Workspace use.
 * `teardown({purge:false})` stops the container and keeps container and data (a later provision of the same
 * spec reattaches); `purge:true` removes both. MCP declarations connect through the in-container gateway.
 */
export class DockerBackendProvider implements BackendProvider {
  readonly kind = "docker" as const;
  readonly persistent = true;
  private readonly handles = new WeakMap<WorkspaceBackend, DockerWorkspaceHandle>();

  constructor(
    readonly workspaces: DockerWorkspaceProvider,
    private readonly options: DockerBackendProviderOptions = {},
  ) {}

  async provision(spec: WorkspaceSpec, options: { signal?: AbortSignal } = {}): Promise<WorkspaceBackend> {
    options.signal?.throwIfAborted();
    const handle = await this.workspaces.open({
      tenantId: spec.tenantId,
      userId: spec.userId,
      workspaceId: spec.workspaceId,
      agentId: spec.agentId,
      reuseToken: this.options.reuseToken ?? false,
      onProgress: (event) => this.options.onProgress?.(spec, event),
    });
    this.handles.set(handle.backend, handle);
    return handle.backend;
  }

  async isAlive(backend: WorkspaceBackend): Promise<boolean> {
    const handle = this.handles.get(backend);
    if (!handle) return false;
    try {
      return await handle.isAlive();
    } catch {
      return false;
    }
  }

  async teardown(backend: WorkspaceBackend, options: { purge: boolean }): Promise<void> {
    const handle = this.handles.get(backend);
    if (!handle) {
      await backend.close();
      return;
    }
    if (options.purge) await this.workspaces.purge(handle.ref, handle.hostWorkdir);
    else await handle.close();
  }

  /**
   * An eviction leaves the container running for every other process: `backend.close()` would stop it. The
   * gateway client holds no connection between calls, and the Workspace closes its MCP clients itself.
   */
  async detach(): Promise<void> {}

  createMcpConnector(backend: WorkspaceBackend): Promise<McpConnector> {
    const handle = this.handles.get(backend);
    if (!handle) {
      return Promise.reject(
        new AppError("INTERNAL", "This backend was not provisioned by the Docker provider"),
      );
    }
    return Promise.resolve(handle.mcpConnector);
  }

  /** The Docker handle behind a backend this provider provisioned (gateway, host workdir, container name). */
  handleOf(backend: WorkspaceBackend): DockerWorkspaceHandle | undefined {
    return this.handles.get(backend);
  }
}
