import type {
  BackendHandle,
  BackendProvider,
  WorkspaceDriver,
  WorkspaceSpec,
} from "@/server/workspace/backend/driver";
import type { WorkspaceBackend } from "@/server/workspace/backend/port";
import { hasVanished, isMachineGone } from "@/server/workspace/backend/vanished";
import type { DriverSet } from "./driver-set";

/** What the workers recorded for a provisioned workspace: its backend and the handle to reattach with. */
export type ProvisionedMachine = { kind: WorkspaceBackend["kind"]; handle: BackendHandle | null };

/**
 * The provision gate. `machineGone`: attaching found the machine of a READY record gone, so the workers
 * must look again (and provision a new one) instead of the gate trusting the record.
 */
export type EnsureProvisioned = (
  spec: WorkspaceSpec,
  options?: { machineGone?: boolean },
) => Promise<ProvisionedMachine>;

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
    private readonly ensureProvisioned: EnsureProvisioned,
  ) {
    this.kind = drivers.default.kind;
    this.persistent = drivers.all.every((driver) => driver.capabilities.persistent);
    this.mayVanish = drivers.all.some((driver) => driver.capabilities.mayVanish);
  }

  async provision(spec: WorkspaceSpec, options?: { signal?: AbortSignal }): Promise<WorkspaceBackend> {
    const attach = async (machine: ProvisionedMachine) => {
      const driver = this.drivers.forKind(machine.kind);
      const backend = await driver.provider.provision({ ...spec, handle: machine.handle }, options);
      this.owners.set(backend, driver);
      return backend;
    };
    try {
      return await attach(await this.ensureProvisioned(spec));
    } catch (error) {
      // The record says READY but its machine is gone (a host folder deleted, a sandbox expired): the
      // workers check, provision a new one and record that the data was lost; then attach to that.
      if (!isMachineGone(error)) throw error;
      return attach(await this.ensureProvisioned(spec, { machineGone: true }));
    }
  }

  isAlive(backend: WorkspaceBackend): Promise<boolean> {
    const driver = this.driverOf(backend);
    // Host folders are stopped and deleted only by Berth's jobs, so liveness is not polled; one deleted
    // outside Berth is noticed on use (the backend is marked vanished) and checked then.
    if (!driver.capabilities.mayVanish && !hasVanished(backend)) return Promise.resolve(true);
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
