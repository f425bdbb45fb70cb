import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { isInside } from "@/server/workspace/paths";
import { workspaceFolder } from "@/server/workspace/drivers/host-folder/folder-layout";
import type { WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { workspaceVanished } from "@/server/workspace/drivers/vanished";
import { isDirectory, HostFolderMachine } from "@/server/workspace/drivers/host-folder/host-folder-machine";

export type HostFoldersOptions = {
  /** Host folder under which every workspace lives as `<basedir>/<tenant>/<user>/<workspaceId>`. */
  basedir: string;
  /** Environment for commands (see HostFolderMachineOptions.env); HOME defaults to each workdir. */
  env?: Record<string, string>;
};

/**
 * Host directories as workspaces, their commands unconfined: the host-unconfined driver's machines (and a test
 * driver's, test/fixtures/throwaway-driver). TRUSTED
 * ONLY (see HostFolderMachine). Workdirs are keyed by tenant, user and workspace id, never by agent id alone (the
 * reference aliased users' workspaces: issue #2107). Only Berth stops or deletes its host folders; one
 * deleted outside Berth is noticed on use instead (`workspaceVanished` marks the machine and the manager
 * re-checks `isAlive` right away).
 */
export class HostFolders {
  private readonly basedir: string;

  constructor(private readonly options: HostFoldersOptions) {
    if (!path.isAbsolute(options.basedir)) {
      throw new AppError("BAD_REQUEST", `basedir must be absolute: ${options.basedir}`);
    }
    this.basedir = path.resolve(options.basedir);
  }

  /** Where a spec's workspace lives on the host (pure; nothing is created). */
  workdirFor(spec: Pick<WorkspaceSpec, "tenantId" | "userId" | "workspaceId">): string {
    return workspaceFolder(this.basedir, spec);
  }

  /**
   * Attaches. With a stored handle the folder was provisioned before, so a missing one vanished behind
   * Berth's back: that is reported (`workspaceVanished`), never papered over with a new empty folder
   * (the workers re-provision it and record that the data was lost). Without one (library use), creates.
   */
  async attach(spec: WorkspaceSpec): Promise<HostFolderMachine> {
    if (spec.handle && !(await isDirectory(this.workdirFor(spec)))) throw workspaceVanished();
    return this.open(spec);
  }

  /** mkdir -p the levels above a workspace (or a warm pool's folder), Berth's only as `open` makes them. */
  async makeParents(dir: string): Promise<void> {
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  }

  /** Creates the folder if missing and returns its machine (what the driver's `create` does). */
  async open(spec: WorkspaceSpec): Promise<HostFolderMachine> {
    const workdir = this.workdirFor(spec);
    await fs.mkdir(workdir, { recursive: true, mode: 0o700 });
    // Confinement compares realpaths, so hand the backend the physical path (basedir may sit behind a symlink).
    const real = await fs.realpath(workdir);
    const realBase = await fs.realpath(this.basedir);
    if (!isInside(realBase, real)) {
      throw new AppError("FORBIDDEN", `Workspace directory escapes the base directory: ${workdir}`);
    }
    return new HostFolderMachine({ workdir: real, env: { HOME: real, ...this.options.env } });
  }

  isAlive(machine: WorkspaceMachine): Promise<boolean> {
    return isDirectory(machine.workdir);
  }
}
