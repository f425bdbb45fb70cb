import type {
  BackendHandle,
  BackendProvider,
  WorkspaceDriver,
  WorkspaceSpec,
} from "@/server/workspace/backend/driver";
import type { WorkspaceBackend } from "@/server/workspace/backend/port";
import type { DriverSet } from "./driver-set";

/** What the workers recorded for a provisioned workspace: its backend and the handle to reattach with. */
export type ProvisionedMachine = { kind: WorkspaceBackend["kind"]; handle: BackendHandle | null };

/**
 * The provider of the per-process WorkspaceManager, over every driver of the installation. Provisioning
 * machines is the WORKERS' job: on a cache miss this provider first makes sure the workspace is provisioned
 * (`ensureProvisioned`: enqueue `workspace.provision` with a deterministic id and wait for it), which answers
 * the record's backend and stored handle; it then ATTACHES through that backend's driver, passing the handle
 * back (the reattach key: an E2B sandbox id is assigned remotely and found only through it).
 *
 * Closing a cached workspace only detaches: stopping a machine is a state change the workers make
 * (`workspace.stop`), recorded in Postgres, never a side effect of one process' cache eviction.
 */
export class AttachingProvider implements BackendProvider {
  /** Reported for the manager's defaults; each operation goes to the backend's own driver. */
  readonly kind: BackendProvider["kind"];
  readonly persistent: boolean;
  readonly mayVanish: boolean;
  /** Which driver attached each live backend: a backend's own `kind` is its class's, not the record's. */
  private readonly owners = new WeakMap<WorkspaceBackend, WorkspaceDriver>();

  constructor(
    private readonly drivers: DriverSet,
    private readonly ensureProvisioned: (spec: WorkspaceSpec) => Promise<ProvisionedMachine>,
  ) {
    this.kind = drivers.default.kind;
    this.persistent = drivers.all.every((driver) => driver.capabilities.persistent);
    this.mayVanish = drivers.all.some((driver) => driver.capabilities.mayVanish);
  }

  async provision(spec: WorkspaceSpec, options?: { signal?: AbortSignal }): Promise<WorkspaceBackend> {
    const machine = await this.ensureProvisioned(spec);
    const driver = this.drivers.forKind(machine.kind);
    const backend = await driver.provider.provision({ ...spec, handle: machine.handle }, options);
    this.owners.set(backend, driver);
    return backend;
  }

  isAlive(backend: WorkspaceBackend): Promise<boolean> {
    const driver = this.driverOf(backend);
    // Host folders only vanish when Berth deletes them, which it does through a stop or purge job.
    if (!driver.capabilities.mayVanish) return Promise.resolve(true);
    return driver.provider.isAlive(backend);
  }

  async teardown(backend: WorkspaceBackend, options: { purge: boolean }): Promise<void> {
    const provider = this.providerOf(backend);
    if (options.purge) return provider.teardown(backend, options);
    await (provider.detach ? provider.detach(backend) : backend.close());
  }

  createMcpConnector(...args: Parameters<NonNullable<BackendProvider["createMcpConnector"]>>) {
    const provider = this.providerOf(args[0]);
    // The host-unconfined driver has no connector: the Workspace runs its MCP servers on the host.
    return provider.createMcpConnector ? provider.createMcpConnector(...args) : undefined;
  }

  private driverOf(backend: WorkspaceBackend): WorkspaceDriver {
    return this.owners.get(backend) ?? this.drivers.forKind(backend.kind);
  }

  private providerOf(backend: WorkspaceBackend): BackendProvider {
    return this.driverOf(backend).provider;
  }
}
