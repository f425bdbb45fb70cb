import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "@/server/shared/errors";
import type { BackendHandle, WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { WARM_POOL_OPERATIONS } from "@/server/workspace/drivers/deferred-operations";
import { deleteHostTree } from "@/server/workspace/drivers/host-folder/host-tree-deleter";
import { isInside } from "@/server/workspace/paths";

/**
 * Where the host-folder drivers keep their pool machines' folders: `<basedir>/.pool/local/<id>`, one folder
 * per kind under `.pool` because the Docker driver's pool shares the base dir (`.pool/docker/`), and each
 * driver lists and discards only its own. A leading dot keeps it out of the workspace layout: no tenant
 * segment can start with one (safePathSegment encodes it as `%2E`) and listResources skips dotted names.
 */
const POOL_FOLDER = path.join(".pool", "local");

/** Pool row ids (driver.ts): letters, digits and `-`, so an id is always one plain segment under `.pool`. */
const POOL_ID = /^[A-Za-z0-9-]{1,120}$/;

/**
 * Bumped when what createIdleMachine leaves behind changes, so pool folders made by an older Berth are
 * discarded instead of bound.
 */
const POOL_FORMAT = 1;

/** What the pool needs of a driver's folders (the bubblewrap or the unconfined ones). */
type PooledFolders = {
  workdirFor(spec: Pick<WorkspaceSpec, "tenantId" | "userId" | "workspaceId">): string;
  /** mkdir -p `dir` (the base dir or a folder above a workspace) with the modes the driver's commands need. */
  makeParents(dir: string): Promise<void>;
  /**
   * Gives a folder just moved in to the workspace's own uid, where the driver has one. Absent: the folder
   * stays Berth's, as a cold create leaves it.
   */
  handOver?(spec: WorkspaceSpec, folder: string): Promise<void>;
};

type HostFolderPoolOptions = {
  basedir: string;
  folders: PooledFolders;
  /**
   * The driver settings a pool machine counts as made with (its warmPoolKey): a folder made before they
   * changed is discarded rather than bound. JSON.
   */
  bakedIn: unknown;
};

type PoolOperations = Pick<WorkspaceDriver, (typeof WARM_POOL_OPERATIONS)[number]>;

/**
 * Warm pools of host folders. What a cold create spends that needs no identity is little (an empty folder
 * and the base dir's modes: about a millisecond, see README of bubblewrap/); a pool folder is that, made
 * ahead under `<basedir>/.pool/local/<id>`, owned by Berth, 0700, empty. Binding moves it into the workspace layout
 * with one rename and hands it to the workspace's uid with one chown (an empty folder): nothing of a
 * tenant is in a pool folder before it is bound, and a bound one is never a pool folder again.
 */
export class HostFolderPool {
  private readonly basedir: string;
  private readonly poolDir: string;
  private realBasedir: Promise<string> | null = null;

  constructor(private readonly options: HostFolderPoolOptions) {
    this.basedir = path.resolve(options.basedir);
    this.poolDir = path.join(this.basedir, POOL_FOLDER);
  }

  operations(): Required<PoolOperations> {
    return {
      warmPoolKey: () => Promise.resolve(this.key()),
      createIdleMachine: (id) => this.create(id),
      bindIdleMachine: (id, handle, spec) => this.bind(id, handle, spec),
      discardIdleMachine: (id) => this.discard(id),
      listIdleMachines: () => this.list(),
    };
  }

  key(): string {
    const baked = JSON.stringify([POOL_FORMAT, this.options.bakedIn]);
    return createHash("sha256").update(baked).digest("hex").slice(0, 16);
  }

  folderOf(id: string): string {
    if (!POOL_ID.test(id)) {
      throw new AppError("BAD_REQUEST", `Not a pool machine id: ${JSON.stringify(id)}`);
    }
    return path.join(this.poolDir, id);
  }

  /** Idempotent: a folder already there (made by a run that crashed after the mkdir) is the machine. */
  async create(id: string): Promise<BackendHandle> {
    const folder = this.folderOf(id);
    await this.options.folders.makeParents(this.basedir);
    // Berth's only: no sandbox reaches a pool folder before its bind moves it out of here.
    await mkdirIfMissing(path.dirname(this.poolDir), 0o700);
    await mkdirIfMissing(this.poolDir, 0o700);
    await mkdirIfMissing(folder, 0o700);
    return { folder, pool: id };
  }

  /**
   * A rename into the workspace layout and a chown. The workspace folder is claimed first with an
   * exclusive mkdir and the pool folder renamed over that empty placeholder: rename(2) alone would replace
   * an existing empty workspace folder silently, and Node has no RENAME_NOREPLACE.
   */
  async bind(id: string, _handle: BackendHandle, spec: WorkspaceSpec): Promise<BackendHandle> {
    const source = this.folderOf(id);
    const target = this.options.folders.workdirFor(spec);
    const parent = path.dirname(target);
    await this.options.folders.makeParents(parent);
    // Berth made every level above, but the base dir may sit behind a symlink: compare physical paths.
    if (!isInside(await this.realBase(), await fs.realpath(parent))) {
      throw new AppError("FORBIDDEN", `Workspace directory escapes the base directory: ${target}`);
    }
    await fs.mkdir(target, { mode: 0o700 }).catch((error: unknown) => {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      throw new AppError("CONFLICT", `The workspace already has a folder: ${target}`, {
        userMessage: "The workspace already has data; it cannot take a pooled machine",
        details: { workspaceId: spec.workspaceId },
      });
    });
    try {
      await fs.rename(source, target);
    } catch (error) {
      // Only the placeholder made above goes (rmdir: empty only); the workspace is as it was.
      await fs.rmdir(target).catch(() => undefined);
      if ((error as NodeJS.ErrnoException).code === "ENOENT") {
        throw new AppError("NOT_FOUND", `Pool machine ${id} is gone (${source})`, { cause: error });
      }
      throw error;
    }
    await this.options.folders.handOver?.(spec, target);
    return { folder: target };
  }

  /** Deletes only under `.pool/`: once bound, the folder is the workspace's and only purge deletes it. */
  async discard(id: string): Promise<void> {
    await deleteHostTree(this.folderOf(id));
  }

  async list(): Promise<string[]> {
    const entries = await fs.readdir(this.poolDir, { withFileTypes: true }).catch((error: unknown) => {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw error;
    });
    return entries.filter((entry) => entry.isDirectory() && POOL_ID.test(entry.name)).map((e) => e.name);
  }

  /** Resolved once (a bind is on a user's path); a failed resolution is retried by the next bind. */
  private realBase(): Promise<string> {
    const resolving = (this.realBasedir ??= fs.realpath(this.basedir));
    resolving.catch(() => {
      if (this.realBasedir === resolving) this.realBasedir = null;
    });
    return resolving;
  }
}

async function mkdirIfMissing(dir: string, mode: number): Promise<void> {
  await fs.mkdir(dir, { mode }).catch(async (error: unknown) => {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    if (!(await fs.lstat(dir)).isDirectory()) {
      throw new AppError("INTERNAL", `${dir} exists and is not a directory`, { cause: error });
    }
  });
}
