import { workspaceVanished } from "@/server/workspace/drivers/vanished";
import path from "node:path";
import { AppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";

/**
 * Path confinement for everything an agent names: file tools, offload references, skill paths.
 *
 * Two checks, both needed:
 * 1. Lexical: the POSIX-normalised path must be the workdir or below it (catches `..`).
 * 2. Physical: the realpath of the nearest existing ancestor must still be inside the realpath of the
 *    workdir (catches symlinks that point out), and a dangling symlink on the way is refused (writing
 *    through it would create a file wherever it points).
 *
 * There is an unavoidable gap between the check and the use (a process inside the workspace could swap a
 * directory for a symlink in between). On isolated backends that only reaches the sandbox itself; on the
 * local backend, Bash can reach the host anyway, which is why it is trusted-only.
 */

/** Linux's bounds (NAME_MAX, PATH_MAX): past them every filesystem call fails with ENAMETOOLONG. */
const MAX_PATH_SEGMENT_BYTES = 255;
const MAX_PATH_BYTES = 4096;

/**
 * Rejects NUL bytes and over-long paths (a clear 400 rather than ENAMETOOLONG from deep inside a backend)
 * and returns the lexically normalised absolute path, without touching the filesystem. Messages never
 * name the workdir: on the local backend it is a host path.
 */
export function resolveLexically(workdir: string, userPath: string): string {
  if (userPath.includes("\0")) {
    throw new AppError("BAD_REQUEST", "Path contains a NUL byte", {
      userMessage: "Error: path contains a NUL byte",
    });
  }
  const resolved = path.posix.resolve(workdir, userPath);
  assertPathLength(resolved, workdir);
  if (!isInside(workdir, resolved)) {
    throw new AppError("FORBIDDEN", `Path escapes the workspace: ${userPath}`, {
      userMessage: `Error: path ${userPath} is outside the workspace`,
      details: { path: userPath },
    });
  }
  return resolved;
}

function assertPathLength(resolved: string, workdir: string): void {
  const longSegment = resolved
    .split("/")
    .find((segment) => Buffer.byteLength(segment) > MAX_PATH_SEGMENT_BYTES);
  if (longSegment !== undefined) {
    throw new AppError("BAD_REQUEST", `path segment of ${Buffer.byteLength(longSegment)} bytes`, {
      userMessage: `Error: a file or folder name in the path is longer than ${MAX_PATH_SEGMENT_BYTES} bytes`,
      details: { maxSegmentBytes: MAX_PATH_SEGMENT_BYTES },
    });
  }
  if (Buffer.byteLength(resolved) > MAX_PATH_BYTES) {
    // The budget a caller has is what is left after the workdir (a relative path is what they see).
    const allowed = MAX_PATH_BYTES - Buffer.byteLength(workdir) - 1;
    throw new AppError("BAD_REQUEST", `path of ${Buffer.byteLength(resolved)} bytes`, {
      userMessage: `Error: the path is too long (at most ${allowed} bytes inside the workspace)`,
      details: { maxPathBytes: allowed },
    });
  }
}

/** True when `candidate` equals `root` or lies below it (both absolute, normalised). */
export function isInside(root: string, candidate: string): boolean {
  if (candidate === root) return true;
  const prefix = root.endsWith("/") ? root : `${root}/`;
  return candidate.startsWith(prefix);
}

const realWorkdirs = new WeakMap<WorkspaceMachine, Promise<string>>();

/** The workdir's own realpath, cached per backend (it does not change while the backend lives). */
export function realWorkdir(machine: WorkspaceMachine): Promise<string> {
  let cached = realWorkdirs.get(machine);
  if (!cached) {
    cached = machine.realpath(machine.workdir).then((real) => real ?? machine.workdir);
    cached.catch(() => realWorkdirs.delete(machine));
    realWorkdirs.set(machine, cached);
  }
  return cached;
}

/**
 * Resolves a user-supplied path (relative paths are taken against the workdir) to a path inside the
 * workspace with no symlink escape. Returns the physical path: the realpath of the nearest existing
 * ancestor plus the not-yet-existing tail. Throws AppError FORBIDDEN on an escape, BAD_REQUEST on NUL.
 */
export async function resolveConfined(machine: WorkspaceMachine, userPath: string): Promise<string> {
  const lexical = resolveLexically(machine.workdir, userPath);
  const root = await realWorkdir(machine);
  const tail: string[] = [];
  let current = lexical;
  for (;;) {
    const real = await machine.realpath(current);
    // The workdir itself is gone: say so, rather than that the path escapes (issue 11).
    if (real === null && current === machine.workdir) throw workspaceVanished(machine);
    if (real !== null) {
      if (!isInside(root, real)) throw escapeError(userPath);
      return tail.length === 0 ? real : path.posix.join(real, ...tail.reverse());
    }
    // Missing: a dangling symlink here would redirect a later write outside, so refuse it.
    const info = await machine.stat(current);
    if (info?.type === "symlink") throw escapeError(userPath);
    const parent = path.posix.dirname(current);
    if (parent === current) throw escapeError(userPath);
    tail.push(path.posix.basename(current));
    current = parent;
  }
}

function escapeError(userPath: string): AppError {
  return new AppError("FORBIDDEN", `Path resolves outside the workspace: ${userPath}`, {
    userMessage: `Error: path ${userPath} resolves outside the workspace`,
    details: { path: userPath },
  });
}

/** Plain identifiers used as single path segments (session ids, tool-call ids, agent ids). */
const SAFE_SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$/;

/** Throws BAD_REQUEST unless `value` is usable as one path segment: no `/`, `\`, NUL, leading `.`, or `..`. */
export function assertSafeSegment(value: string, what: string): string {
  if (!SAFE_SEGMENT.test(value) || value.includes("..")) {
    throw new AppError("BAD_REQUEST", `Invalid ${what}: ${JSON.stringify(value)}`, {
      userMessage: `Invalid ${what}: only letters, digits, '_', '-' and '.' are allowed (not leading '.')`,
      details: { [what]: value },
    });
  }
  return value;
}
