import type {
  AttachedMachine,
  MachineAttacher,
  WorkspaceDriver,
  WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import type { BackendKind, WorkspaceMachine } from "@/server/workspace/drivers/port";
import { createHostFolderDriver } from "@/server/workspace/manager/local-workspace-manager";

/**
 * A real attacher (host directories through the host-unconfined driver) with knobs for manager tests:
 * counts attaches, can fail, can hold every attach at a barrier, and can report machines dead. Nothing is
 * faked below the driver seam.
 */
export class TestAttacher implements MachineAttacher {
  readonly mayVanish: boolean;
  /** The host-folder driver, as `kind` (a `docker` kind makes liveness checks apply). */
  readonly driver: WorkspaceDriver;
  attaches: WorkspaceSpec[] = [];
  detaches: Array<{ workdir: string }> = [];
  failuresLeft = 0;
  /** The next attached machine fails its first mkdir, so Workspace.initialize fails after attaching. */
  breakNextLayout = false;
  readonly dead = new Set<WorkspaceMachine>();
  private barrier: { size: number; waiting: Array<() => void> } | null = null;
  /** Highest number of attach calls in flight at once. */
  maxConcurrent = 0;
  private inFlight = 0;

  constructor(basedir: string, kind: BackendKind = "local") {
    const base = createHostFolderDriver({ basedir });
    this.mayVanish = kind !== "local";
    this.driver = {
      ...base,
      kind,
      capabilities: { ...base.capabilities, mayVanish: this.mayVanish },
      isAlive: async (machine) => !this.dead.has(machine) && (await base.isAlive(machine)),
      detach: async (machine) => {
        this.detaches.push({ workdir: machine.workdir });
        await base.detach(machine);
      },
    };
  }

  /** Every attach waits until `size` attaches are waiting at once, then all proceed. */
  holdUntil(size: number): void {
    this.barrier = { size, waiting: [] };
  }

  async attach(spec: WorkspaceSpec): Promise<AttachedMachine> {
    this.attaches.push(spec);
    this.inFlight++;
    this.maxConcurrent = Math.max(this.maxConcurrent, this.inFlight);
    try {
      if (this.barrier) {
        const barrier = this.barrier;
        await new Promise<void>((resolve) => {
          barrier.waiting.push(resolve);
          if (barrier.waiting.length >= barrier.size) barrier.waiting.forEach((release) => release());
        });
      }
      if (this.failuresLeft > 0) {
        this.failuresLeft--;
        throw new Error("attach failed on purpose");
      }
      const machine = await this.driver.attach(spec);
      if (this.breakNextLayout) {
        this.breakNextLayout = false;
        machine.mkdir = () => Promise.reject(new Error("disk full"));
      }
      return { driver: this.driver, machine };
    } finally {
      this.inFlight--;
    }
  }
}
