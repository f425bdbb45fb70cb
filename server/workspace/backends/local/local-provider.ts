import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "@/server/shared/errors";
import type { WorkspaceBackend } from "@/server/workspace/backend/port";
import { isInside } from "@/server/workspace/paths";
import type { BackendProvider, WorkspaceSpec } from "@/server/workspace/backend/driver";
import { workspaceVanished } from "@/server/workspace/backend/vanished";
import { isDirectory, LocalBackend } from "./local-backend";

export type LocalBackendProviderOptions = {
  /** Host folder under which every workspace lives as `<basedir>/<tenant>/<user>/<workspaceId>`. */
  basedir: string;
  /** Environment for commands (see LocalBackendOptions.env); HOME defaults to each workdir. */
  env?: Record<string, string>;
};

/**
 * Host directories as workspaces. TRUSTED ONLY (see LocalBackend). Workdirs are keyed by tenant, user and
 * workspace id, never by agent id alone (the reference aliased users' workspaces: issue #2107).
 */
export class LocalBackendProvider implements BackendProvider {
  readonly kind = "local" as const;
  readonly persistent = true;
  /**
   * Only Berth stops or deletes its host folders; one deleted outside Berth is noticed on use instead
   * (`workspaceVanished` marks the backend and the manager re-checks `isAlive` right away).
   */
  readonly mayVanish = false;
  private readonly basedir: string;

  constructor(private readonly options: LocalBackendProviderOptions) {
    if (!path.isAbsolute(options.basedir)) {
      throw new AppError("BAD_REQUEST", `basedir must be absolute: ${options.basedir}`);
    }
    this.basedir = path.resolve(options.basedir);
  }

  /** Where a spec's workspace lives on the host (pure; nothing is created). */
  workdirFor(spec: Pick<WorkspaceSpec, "tenantId" | "userId" | "workspaceId">): string {
    return path.join(
      this.basedir,
      safePathSegment(spec.tenantId),
      safePathSegment(spec.userId),
      safePathSegment(spec.workspaceId),
    );
  }

  /**
   * Attaches. With a stored handle the folder was provisioned before, so a missing one vanished behind
   * Berth's back: that is reported (`workspaceVanished`), never papered over with a new empty folder
   * (the workers re-provision it and record that the data was lost). Without one (library use), creates.
   */
  async provision(spec: WorkspaceSpec): Promise<LocalBackend> {
    if (spec.handle && !(await isDirectory(this.workdirFor(spec)))) throw workspaceVanished();
    return this.create(spec);
  }

  /** Creates the folder if missing and returns its backend (the machine controller's provision). */
  async create(spec: WorkspaceSpec): Promise<LocalBackend> {
    const workdir = this.workdirFor(spec);
    await fs.mkdir(workdir, { recursive: true, mode: 0o700 });
    // Confinement compares realpaths, so hand the backend the physical path (basedir may sit behind a symlink).
    const real = await fs.realpath(workdir);
    const realBase = await fs.realpath(this.basedir);
    if (!isInside(realBase, real)) {
      throw new AppError("FORBIDDEN", `Workspace directory escapes the base directory: ${workdir}`);
    }
    return new LocalBackend({ workdir: real, env: { HOME: real, ...this.options.env } });
  }

  isAlive(backend: WorkspaceBackend): Promise<boolean> {
    return isDirectory(backend.workdir);
  }

  async teardown(backend: WorkspaceBackend, options: { purge: boolean }): Promise<void> {
    await backend.close();
    if (options.purge) await fs.rm(backend.workdir, { recursive: true, force: true });
  }
}

const PLAIN_SEGMENT = /^[A-Za-z0-9_-]+$/;
const MAX_SEGMENT_LENGTH = 120;

/**
 * Maps any id to one safe, collision-free directory name: plain ids stay as they are; anything else is
 * percent-encoded byte by byte (`%2F`, `%2E`, ...), which can never equal a plain id because plain ids contain
 * no `%`. The empty id is `%`; overlong results become `%h<sha256>` (`h` is not a hex digit, so no clash).
 */
export function safePathSegment(id: string): string {
  if (id.length === 0) return "%";
  const encoded = PLAIN_SEGMENT.test(id)
    ? id
    : Array.from(Buffer.from(id, "utf8"), (byte) => {
        const ch = String.fromCharCode(byte);
        return byte < 0x80 && PLAIN_SEGMENT.test(ch)
          ? ch
          : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
      }).join("");
  if (encoded.length <= MAX_SEGMENT_LENGTH) return encoded;
  return `%h${createHash("sha256").update(id, "utf8").digest("hex")}`;
}
