import fs from "node:fs/promises";
import path from "node:path";
import { safePathSegment } from "./local-provider";
import type {
  BackendHandle,
  MachineController,
  MachineResource,
  WorkspaceSpec,
} from "@/server/workspace/backend/driver";
import { directoryBytes, type MachineUsage } from "@/server/workspace/backend/machine-usage";
import type { WorkspaceBackend } from "@/server/workspace/backend/port";

/** What the host-folder machine needs of its provider (the bubblewrap one or the unconfined one). */
type HostFolderProvider = {
  workdirFor(spec: Pick<WorkspaceSpec, "tenantId" | "userId" | "workspaceId">): string;
  /** Creates the folder when missing (attaching, `provision`, refuses a vanished one). */
  create(spec: WorkspaceSpec): Promise<WorkspaceBackend>;
};

export type LocalMachineOptions = {
  basedir: string;
  provider: HostFolderProvider;
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
export class LocalMachineController implements MachineController {
  readonly kind = "local" as const;

  constructor(private readonly options: LocalMachineOptions) {}

  private get provider(): HostFolderProvider {
    return this.options.provider;
  }

  /** The folder is named by the ids: the handle only records where it is, for operators. */
  async provision(spec: WorkspaceSpec): Promise<BackendHandle> {
    const backend = await this.provider.create(spec);
    await backend.close();
    return { folder: this.provider.workdirFor(spec) };
  }

  async stop(spec: WorkspaceSpec): Promise<void> {
    await this.options.stopProcesses?.(spec);
  }

  async purge(spec: WorkspaceSpec): Promise<string[]> {
    const workdir = this.provider.workdirFor(spec);
    const existed = await fs.stat(workdir).then(
      () => true,
      () => false,
    );
    await this.stop(spec);
    await fs.rm(workdir, { recursive: true, force: true });
    return existed ? [`directory:${workdir}`] : [];
  }

  /** The folder's size on disk, and what the sandboxes' cgroup says (bubblewrap as root). */
  async usage(spec: WorkspaceSpec): Promise<MachineUsage | null> {
    const diskBytes = await directoryBytes(this.provider.workdirFor(spec));
    const processes = this.options.processUsage?.(spec) ?? null;
    return {
      cpuSeconds: processes?.cpuSeconds ?? null,
      memoryBytes: processes?.memoryBytes ?? null,
      diskBytes,
      processes: processes?.processes ?? null,
    };
  }

  async exists(spec: WorkspaceSpec): Promise<boolean> {
    const info = await fs.stat(this.provider.workdirFor(spec)).catch(() => null);
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

  async reap(resource: MachineResource): Promise<void> {
    // Only ever delete inside basedir, three levels down, whatever the locator says.
    const relative = path.relative(this.options.basedir, resource.locator);
    if (relative.startsWith("..") || path.isAbsolute(relative) || relative.split(path.sep).length !== 3) {
      throw new Error(`refusing to reap ${resource.locator}: not a workspace folder under the basedir`);
    }
    await fs.rm(resource.locator, { recursive: true, force: true });
  }
}

/**
 * Folders of the workspace layout. A name starting with "." is never one (safePathSegment encodes a
 * leading dot as %2E): other drivers keep their runtime state there (`.runtime/`), and it must never be
 * listed, let alone reaped, as an orphan workspace.
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
