import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "@/server/shared/errors";
import { isInside } from "@/server/workspace/paths";
import { SANDBOX_WORKDIR } from "./sandbox-config";

const MAX_SYMLINKS = 40;

/**
 * Translates between the sandbox's view (the workspace at /workspace) and the host folder behind it.
 * Berth's file tools work in the sandbox's view, so a symlink the agent made (`ln -s /workspace/a b`)
 * means the same to them as to its shell, and nothing outside the workspace is reachable by name.
 */
export class SandboxView {
  constructor(readonly hostRoot: string) {}

  /** Host path of a sandbox path inside the workspace; FORBIDDEN for anything else. */
  toHost(sandboxPath: string): string {
    if (sandboxPath.includes("\0")) throw new AppError("BAD_REQUEST", "Path contains a NUL byte");
    const resolved = path.posix.resolve(SANDBOX_WORKDIR, sandboxPath);
    if (!isInside(SANDBOX_WORKDIR, resolved)) {
      throw new AppError("FORBIDDEN", `Only the workspace is reachable here: ${sandboxPath}`, {
        details: { path: sandboxPath },
      });
    }
    return path.join(this.hostRoot, path.posix.relative(SANDBOX_WORKDIR, resolved));
  }

  isInWorkspace(sandboxPath: string): boolean {
    return isInside(SANDBOX_WORKDIR, path.posix.resolve(SANDBOX_WORKDIR, sandboxPath));
  }

  /**
   * realpath in the sandbox's view: symlinks are followed component by component, absolute targets
   * taken as the sandbox sees them. A path that leaves the workspace resolves to where it points (the
   * tools then refuse it) without following it any further on the host; a missing component → null.
   */
  async realpath(sandboxPath: string): Promise<string | null> {
    let pending = path.posix.resolve(SANDBOX_WORKDIR, sandboxPath).split("/").filter(Boolean);
    let resolved = "/";
    let links = 0;
    while (pending.length > 0) {
      const [name, ...rest] = pending;
      pending = rest;
      if (name === ".") continue;
      const next = name === ".." ? path.posix.dirname(resolved) : path.posix.join(resolved, name!);
      if (!isInside(SANDBOX_WORKDIR, next)) {
        // Above or beside the workspace (`/`, `/etc`): not ours to resolve; report it as it reads.
        resolved = next;
        if (!isInside(next, SANDBOX_WORKDIR)) return path.posix.join(next, ...pending);
        continue;
      }
      const host = this.toHost(next);
      const info = await fs.lstat(host).catch(() => null);
      if (!info) return null;
      if (!info.isSymbolicLink()) {
        resolved = next;
        continue;
      }
      if (++links > MAX_SYMLINKS) return null;
      const target = await fs.readlink(host);
      const base = path.posix.isAbsolute(target) ? "/" : resolved;
      pending = [...path.posix.resolve(base, target).split("/").filter(Boolean), ...pending];
      resolved = "/";
    }
    return resolved;
  }
}
