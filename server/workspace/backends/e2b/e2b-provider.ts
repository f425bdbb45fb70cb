import { AppError } from "@/server/shared/errors";
import type {
  BackendHandle,
  BackendProvider,
  MachineController,
  MachineResource,
  ProvisionProgress,
  WorkspaceSpec,
} from "@/server/workspace/backend/driver";
import type { MachineUsage } from "@/server/workspace/backend/machine-usage";
import type { WorkspaceBackend } from "@/server/workspace/backend/port";
import type { McpConnector } from "@/server/workspace/mcp/types";
import { E2bBackend } from "./e2b-backend";
import { removeCredentials } from "./e2b-gateway";
import type { E2bTeams } from "./e2b-teams";

function e2bBackendOf(backend: WorkspaceBackend): E2bBackend {
  if (backend instanceof E2bBackend) return backend;
  throw new AppError("INTERNAL", "This backend was not provisioned by the E2B driver");
}

/**
 * How any process attaches to a workspace's sandbox: `provision` connects by the stored handle (resuming
 * a sandbox E2B paused on its own) and reuses the running gateway; it never creates a sandbox. Closing or
 * detaching only lets go of this process' connections; `teardown` pauses (or, with purge, kills).
 */
export class E2bBackendProvider implements BackendProvider {
  readonly kind = "e2b" as const;
  readonly persistent = true;

  constructor(private readonly teams: E2bTeams) {}

  async provision(spec: WorkspaceSpec, options: { signal?: AbortSignal } = {}): Promise<WorkspaceBackend> {
    options.signal?.throwIfAborted();
    return (await this.teams.forTenant(spec.tenantId)).attach(spec);
  }

  isAlive(backend: WorkspaceBackend): Promise<boolean> {
    return backend instanceof E2bBackend ? backend.isAlive() : Promise.resolve(false);
  }

  async teardown(backend: WorkspaceBackend, options: { purge: boolean }): Promise<void> {
    const e2b = e2bBackendOf(backend);
    await e2b.close();
    // Through the client it was attached with: the sandbox is in that (tenant's or installation's) team.
    if (options.purge) {
      await e2b.client.kill(e2b.sandboxId);
      await removeCredentials(this.teams.installation.runtimeDir, e2b.sandboxId);
      return;
    }
    await e2b.client.pause(e2b.sandboxId);
  }

  detach(backend: WorkspaceBackend): Promise<void> {
    return backend.close();
  }

  createMcpConnector(backend: WorkspaceBackend): Promise<McpConnector> {
    return Promise.resolve(e2bBackendOf(backend).gateway.connector);
  }
}

/** What the workers do: provision (create, resume, verify, gateway), stop = pause, purge = kill, reconcile. */
export class E2bMachineController implements MachineController {
  readonly kind = "e2b" as const;

  constructor(private readonly teams: E2bTeams) {}

  async provision(
    spec: WorkspaceSpec,
    options: { onProgress?: (progress: ProvisionProgress) => void } = {},
  ): Promise<BackendHandle> {
    return (await this.teams.forTenant(spec.tenantId)).provision(spec, options.onProgress);
  }

  async stop(spec: WorkspaceSpec): Promise<void> {
    return (await this.teams.forTenant(spec.tenantId)).stop(spec);
  }

  async purge(spec: WorkspaceSpec): Promise<string[]> {
    return (await this.teams.forTenant(spec.tenantId)).purge(spec);
  }

  async exists(spec: WorkspaceSpec): Promise<boolean> {
    return (await this.teams.forTenant(spec.tenantId)).exists(spec);
  }

  /** E2B's own sandbox metrics (CPU, memory, disk; no process count): E2bSandboxes.usage. */
  async usage(spec: WorkspaceSpec): Promise<MachineUsage | null> {
    return (await this.teams.forTenant(spec.tenantId)).usage(spec);
  }

  listResources(): Promise<MachineResource[]> {
    return this.teams.listResources();
  }

  reap(resource: MachineResource): Promise<void> {
    return this.teams.reap(resource);
  }
}
