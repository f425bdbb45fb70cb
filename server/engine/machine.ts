import type { BackendKind } from "@/server/workspace/backend/port";
import type { BackendProvider, WorkspaceSpec } from "@/server/workspace/provider";

/** A backend resource (folder, container) that carries Berth's naming, found by `listResources`. */
export type MachineResource = {
  /** Decoded from the resource's name or labels; null when it cannot be decoded (hashed names). */
  workspaceId: string | null;
  tenantId: string | null;
  /** What an operator would look for: the folder path or the container name. */
  locator: string;
};

/**
 * What the installation's backend confines, for the API and the dashboard: `isolated` is false when agent
 * commands run on the host with Berth's privileges (`host-unconfined`, trusted agents only).
 */
export type BackendIsolation = {
  backend: "local" | "host-unconfined" | "docker";
  isolated: boolean;
  /** The sandbox technology, when there is one besides the backend itself ("bubblewrap"). */
  sandbox: string | null;
};

/** One step of a machine's provisioning (image build lines, container created, gateway ready, ...). */
export type ProvisionProgress = { step: string; detail?: string | undefined };

/**
 * What the WORKERS do to a workspace's machine, per backend kind. The API process never calls these: it only
 * attaches (BackendProvider.provision on an already-provisioned machine). Every method is idempotent, since
 * a job may run again after a crash.
 */
export interface MachineController {
  readonly kind: BackendKind;
  readonly isolation: BackendIsolation;
  /** Creates or restarts the machine and leaves it running; returns a handle to store (no secrets). */
  provision(
    spec: WorkspaceSpec,
    options?: { onProgress?: (progress: ProvisionProgress) => void },
  ): Promise<Record<string, unknown>>;
  /** Stops the machine, keeping its data. */
  stop(spec: WorkspaceSpec): Promise<void>;
  /** Deletes the machine and its data; returns what it deleted (for the purge receipt). */
  purge(spec: WorkspaceSpec): Promise<string[]>;
  /** Whether the machine's data/resource still exists (reconcile: records whose resources vanished). */
  exists(spec: WorkspaceSpec): Promise<boolean>;
  /** Every resource under Berth's paths/labels (reconcile: resources without a record). */
  listResources(): Promise<MachineResource[]>;
  /** Deletes one resource found by `listResources` (an orphan). */
  reap(resource: MachineResource): Promise<void>;
  /**
   * Removes machine images nothing needs any more (Docker: workspace images of an earlier Berth or config
   * that no container uses); returns what it removed, or would remove on a dry run. Absent: nothing to do.
   */
  pruneImages?(options: { dryRun: boolean }): Promise<string[]>;
  /** The provider API processes attach with (and workers use for one-off work such as purging files). */
  readonly provider: BackendProvider;
}
