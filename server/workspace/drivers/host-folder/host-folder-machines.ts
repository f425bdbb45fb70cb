import fs from "node:fs/promises";
import path from "node:path";
import { safePathSegment } from "@/server/workspace/drivers/host-folder/folder-layout";
import type {
  BackendHandle,
  CreateOptions,
  MachineDeletionOptions,
  MachineResource,
  WorkspaceDriver,
  WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import { deleteHostTree } from "@/server/workspace/drivers/host-folder/host-tree-deleter";
import { directoryBytes, type MachineUsage } from "@/server/workspace/drivers/machine-usage";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";

/** What the workers' side of host folders needs of a driver's folders (the bubblewrap or the unconfined ones). */
type FolderOpener = {
  workdirFor(spec: Pick<WorkspaceSpec, "tenantId" | "userId" | "workspaceId">): string;
  /** Creates the folder when missing (unlike `attach`, which refuses a vanished one). */
  open(spec: WorkspaceSpec): Promise<WorkspaceMachine>;
};

export type HostFolderMachinesOptions = {
  basedir: string;
  folders: FolderOpener;
  /**
   * Ends every process the workspace started, whichever Berth process started it (the sandbox registry of
   * the bubblewrap driver). Absent for host-unconfined: its commands are the host's own processes, with
   * nothing to find them by (trusted agents only).
   */
  stopProcesses?: (spec: WorkspaceSpec) => Promise<unknown>;
  /**
   * CPU, memory and processes of the workspace (the bubblewrap driver's memory cgroup), null where none
   * can be told. Absent for host-unconfined, for the same reason as `stopProcesses`.
   */
  processUsage?: (
    spec: WorkspaceSpec,
  ) => { cpuSeconds: number | null; memoryBytes: number; processes: number } | null;
};

/**
 * Host folders `<basedir>/<tenant>/<user>/<workspaceId>`, the machine of both host-folder drivers (`local`,
 * confined by bubblewrap, and `host-unconfined`): the same layout whichever confinement runs them, so
 * switching keeps the data. Stopping ends the workspace's processes; data always stays.
 */
export class HostFolderMachines {
  constructor(private readonly options: HostFolderMachinesOptions) {}

  /** The workers' operations of a host-folder driver, bound to these folders. */
  operations(): Pick<
    WorkspaceDriver,
    "create" | "stop" | "purge" | "exists" | "listResources" | "reap" | "usage"
  > {
    return {
      create: (spec, options) => this.create(spec, options),
      stop: (spec) => this.stop(spec),
      purge: (spec, options) => this.purge(spec, options),
      exists: (spec) => this.exists(spec),
      listResources: () => this.listResources(),
      reap: (resource, options) => this.reap(resource, options),
      usage: (spec) => this.usage(spec),
    };
  }

  private get folders(): FolderOpener {
    return this.options.folders;
  }

  /**
   * The folder is named by the ids: the handle only records where it is, for operators. Making a folder
   * has no steps worth reporting (`options` is for subclasses that do).
   */
  async create(spec: WorkspaceSpec, _options?: CreateOptions): Promise<BackendHandle> {
    const machine = await this.folders.open(spec);
    await machine.close();
    return { folder: this.folders.workdirFor(spec) };
  }

  async stop(spec: WorkspaceSpec): Promise<void> {
    await this.options.stopProcesses?.(spec);
  }

  /**
   * In yielding batches (host-tree-deleter.ts): fs.rm of a million files held the worker's event loop for
   * seconds. A purge stopped half-way (`signal`) is finished by the next one; the folder counts as
   * deleted by it either way.
   */
  async purge(spec: WorkspaceSpec, options: MachineDeletionOptions = {}): Promise<string[]> {
    const workdir = this.folders.workdirFor(spec);
    const existed = await fs.stat(workdir).then(
      () => true,
      () => false,
    );
    await this.stop(spec);
    await deleteHostTree(workdir, options);
    return existed ? [`directory:${workdir}`] : [];
  }

  /** The folder's size on disk, and what the sandboxes' cgroup says (bubblewrap as root). */
  async usage(spec: WorkspaceSpec): Promise<MachineUsage | null> {
    const diskBytes = await directoryBytes(this.folders.workdirFor(spec));
    const processes = this.options.processUsage?.(spec) ?? null;
    return {
      cpuSeconds: processes?.cpuSeconds ?? null,
      memoryBytes: processes?.memoryBytes ?? null,
      diskBytes,
      processes: processes?.processes ?? null,
    };
  }

  async exists(spec: WorkspaceSpec): Promise<boolean> {
    const info = await fs.stat(this.folders.workdirFor(spec)).catch(() => null);
    return info?.isDirectory() ?? false;
  }

  async listResources(): Promise<MachineResource[]> {
    const found: MachineResource[] = [];
    for (const tenant of await subdirectories(this.options.basedir)) {
      for (const user of await subdirectories(path.join(this.options.basedir, tenant))) {
        for (const workspace of await subdirectories(path.join(this.options.basedir, tenant, user))) {
          found.push({
            workspaceId: decodeSegment(workspace),
            tenantId: decodeSegment(tenant),
            locator: path.join(this.options.basedir, tenant, user, workspace),
          });
        }
      }
    }
    return found;
  }

  async reap(resource: MachineResource, options: MachineDeletionOptions = {}): Promise<void> {
    // Only ever delete inside basedir, three levels down, whatever the locator says, and never in a dotted
    // folder (drivers' own state: `.pool/<kind>/<id>` is three levels down too).
    const relative = path.relative(this.options.basedir, resource.locator);
    const segments = relative.split(path.sep);
    if (
      relative.startsWith("..") ||
      path.isAbsolute(relative) ||
      segments.length !== 3 ||
      segments.some((segment) => segment.startsWith("."))
    ) {
      throw new Error(`refusing to reap ${resource.locator}: not a workspace folder under the basedir`);
    }
    await deleteHostTree(resource.locator, options);
  }
}

/**
 * Folders of the workspace layout. A name starting with "." is never one (safePathSegment encodes a
 * leading dot as %2E): drivers keep their own state there (`.runtime/`, the warm pools' `.pool/`), and it
 * must never be listed, let alone reaped, as an orphan workspace.
 */
async function subdirectories(dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { withFileTypes: true }).catch(() => []);
  return entries
    .filter((entry) => entry.isDirectory() && !entry.name.startsWith("."))
    .map((entry) => entry.name);
}

/** Inverse of safePathSegment; null for hashed (overlong) names, which cannot be decoded. */
function decodeSegment(segment: string): string | null {
  if (segment === "%") return "";
  if (segment.startsWith("%h")) return null;
  try {
    const decoded = decodeURIComponent(segment);
    return safePathSegment(decoded) === segment ? decoded : null;
  } catch {
    return null;
  }
}
