import type { WorkspaceBackend } from "@/server/workspace/backend/port";
import type { BackendProvider, WorkspaceSpec } from "@/server/workspace/provider";

/**
 * The provider of the per-process WorkspaceManager. Provisioning machines is the WORKERS' job: on a cache
 * miss this provider first waits until the workspace is provisioned (`ensureProvisioned`: enqueue
 * `workspace.provision` with a deterministic id and wait for it), then ATTACHES to the machine (local: opens
 * the same directory; docker: reattaches to the container by its deterministic name).
 *
 * Closing a cached workspace only detaches: stopping a machine is a state change the workers make
 * (`workspace.stop`), recorded in Postgres, never a side effect of one process' cache eviction.
 */
export class AttachingProvider implements BackendProvider {
  readonly kind: BackendProvider["kind"];
  readonly persistent: boolean;
  readonly createMcpConnector?: BackendProvider["createMcpConnector"];

  constructor(
    private readonly inner: BackendProvider,
    private readonly ensureProvisioned: ((spec: WorkspaceSpec) => Promise<void>) | null,
  ) {
    this.kind = inner.kind;
    this.persistent = inner.persistent;
    if (inner.createMcpConnector) this.createMcpConnector = inner.createMcpConnector.bind(inner);
  }

  async provision(spec: WorkspaceSpec, options?: { signal?: AbortSignal }): Promise<WorkspaceBackend> {
    if (this.ensureProvisioned) await this.ensureProvisioned(spec);
    return this.inner.provision(spec, options);
  }

  isAlive(backend: WorkspaceBackend): Promise<boolean> {
    return this.inner.isAlive(backend);
  }

  async teardown(backend: WorkspaceBackend, options: { purge: boolean }): Promise<void> {
    if (options.purge) return this.inner.teardown(backend, options);
    // A local backend's close only releases host handles; sandboxed backends' close stops the machine,
    // which is not ours to do here.
    if (backend.kind === "local") await backend.close();
  }
}
