import type {
  AttachedMachine,
  AttachOptions,
  BackendHandle,
  MachineAttacher,
  WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import type { BackendKind } from "@/server/workspace/drivers/port";
import { isMachineGone } from "@/server/workspace/drivers/vanished";
import type { DriverSet } from "./driver-set";

/** What the workers recorded for a created machine: its backend kind and the handle to reattach with. */
export type ProvisionedMachine = { kind: BackendKind; handle: BackendHandle | null };

/**
 * The provision gate. `machineGone`: attaching found the machine of a READY record gone, so the workers
 * must look again (and create a new one) instead of the gate trusting the record.
 */
export type EnsureProvisioned = (
  spec: WorkspaceSpec,
  options?: { machineGone?: boolean },
) => Promise<ProvisionedMachine>;

/**
 * The attacher of the per-process WorkspaceManager, over every driver of the installation. Creating
 * machines is the WORKERS' job: on a cache miss this attacher first makes sure the workspace is provisioned
 * (`ensureProvisioned`: enqueue `workspace.provision` with a deterministic id and wait for it), which answers
 * the record's backend kind and stored handle; it then ATTACHES through that kind's driver, passing the
 * handle back (the reattach key: an E2B sandbox id is assigned remotely and found only through it).
 *
 * Closing a cached workspace only detaches (`driver.detach`): stopping a machine is a state change the
 * workers make (`workspace.stop`), recorded in Postgres, never a side effect of one process' cache eviction.
 */
export class RecordAttacher implements MachineAttacher {
  readonly mayVanish: boolean;

  constructor(
    private readonly drivers: DriverSet,
    private readonly ensureProvisioned: EnsureProvisioned,
  ) {
    this.mayVanish = drivers.all.some((driver) => driver.capabilities.mayVanish);
  }

  async attach(spec: WorkspaceSpec, options?: AttachOptions): Promise<AttachedMachine> {
    const attach = async (provisioned: ProvisionedMachine) => {
      const driver = this.drivers.forKind(provisioned.kind);
      const machine = await driver.attach({ ...spec, handle: provisioned.handle }, options);
      return { driver, machine };
    };
    try {
      return await attach(await this.ensureProvisioned(spec));
    } catch (error) {
      // The record says READY but its machine is gone (a host folder deleted, a sandbox expired): the
      // workers check, create a new one and record that the data was lost; then attach to that.
      if (!isMachineGone(error)) throw error;
      return attach(await this.ensureProvisioned(spec, { machineGone: true }));
    }
  }
}
