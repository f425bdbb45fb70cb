import { AppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import type { McpConnector } from "@/server/workspace/mcp/types";
import type { AttachOptions, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { poolIdOf } from "./docker-pool-layout";
import type { DockerCreateEvent, DockerWorkspaceHandle, DockerContainers } from "./docker-containers";

export type DockerAttacherOptions = {
  /** Provisioning progress (image build lines, container created/reattached, gateway ready) per workspace. */
  onProgress?: (spec: WorkspaceSpec, event: DockerCreateEvent) => void;
  /** Passed to every open(): reuse a healthy gateway another process started (see DockerWorkspaceRequest). */
  reuseToken?: boolean;
};

/**
 * The driver's attaching side over DockerContainers: what every process does with a workspace's
 * container (attach, liveness, detach, MCP through the in-container gateway). Stopping and purging are the
 * workers' (DockerMachines).
 */
export class DockerAttacher {
  private readonly handles = new WeakMap<WorkspaceMachine, DockerWorkspaceHandle>();

  constructor(
    readonly workspaces: DockerContainers,
    private readonly options: DockerAttacherOptions = {},
  ) {}

  async attach(spec: WorkspaceSpec, options: AttachOptions = {}): Promise<WorkspaceMachine> {
    options.signal?.throwIfAborted();
    const pool = poolIdOf(spec.handle);
    const handle = await this.workspaces.open({
      tenantId: spec.tenantId,
      userId: spec.userId,
      workspaceId: spec.workspaceId,
      agentId: spec.agentId,
      reuseToken: this.options.reuseToken ?? false,
      // With the engine's stored handle the folder exists already: a missing one vanished (see open()).
      provisionedBefore: Boolean(spec.handle),
      // A workspace given a warm pool machine keeps using its container (docker-warm-pool.ts).
      ...(pool === null ? {} : { pool }),
      onProgress: (event) => this.options.onProgress?.(spec, event),
    });
    this.handles.set(handle.backend, handle);
    return handle.backend;
  }

  async isAlive(machine: WorkspaceMachine): Promise<boolean> {
    const handle = this.handles.get(machine);
    if (!handle) return false;
    try {
      return await handle.isAlive();
    } catch {
      return false;
    }
  }

  /**
   * An eviction leaves the container running for every other process: `machine.close()` would stop it. The
   * gateway client holds no connection between calls, and the Workspace closes its MCP clients itself.
   */
  async detach(): Promise<void> {}

  connectMcp(machine: WorkspaceMachine): Promise<McpConnector> {
    const handle = this.handles.get(machine);
    if (!handle) {
      return Promise.reject(new AppError("INTERNAL", "This machine was not attached by the Docker driver"));
    }
    return Promise.resolve(handle.mcpConnector);
  }

  /** The Docker handle behind a machine this attacher attached (gateway, host workdir, container name). */
  handleOf(machine: WorkspaceMachine): DockerWorkspaceHandle | undefined {
    return this.handles.get(machine);
  }
}
