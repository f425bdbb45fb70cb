import path from "node:path";
import { AppError } from "@/server/shared/errors";
import type { ArchiveEntry } from "@/server/workspace/archive/archive-entries";

const MAX_PATH_CHARS = 1024;
const MAX_SEGMENT_BYTES = 255;
// C0 and C1 control characters, DEL included. NUL is the first of them.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/;

function hostile(entry: string, reason: string): AppError {
  return new AppError("BAD_REQUEST", `Unsafe archive entry ${JSON.stringify(entry)}: ${reason}`, {
    userMessage: `The archive contains an unsafe entry (${reason})`,
    details: { entry, reason },
  });
}

/**
 * Normalises an entry name to a relative POSIX path, or throws BAD_REQUEST for anything that could land
 * outside the target or confuse a filesystem: absolute paths, drive letters, `..`, backslashes, control
 * characters (NUL included), over-long names. Returns null for the archive root itself (`./`).
 */
function normaliseEntryName(raw: string): string | null {
  if (CONTROL_CHARACTERS.test(raw)) return rejectName(raw, "control character in name");
  if (raw.includes("\\")) return rejectName(raw, "backslash in name");
  if (raw.startsWith("/") || /^[A-Za-z]:/.test(raw)) return rejectName(raw, "absolute path");
  const segments = raw.split("/").filter((segment) => segment !== "" && segment !== ".");
  if (segments.includes("..")) return rejectName(raw, "parent directory reference");
  if (segments.length === 0) return null;
  const name = segments.join("/");
  if (name.length > MAX_PATH_CHARS) return rejectName(raw, "name too long");
  if (segments.some((segment) => Buffer.byteLength(segment) > MAX_SEGMENT_BYTES)) {
    return rejectName(raw, "path segment too long");
  }
  return name;
}

function rejectName(raw: string, reason: string): never {
  throw hostile(raw, reason);
}

/** An accepted entry: the directories to create first (missing parents, in order) and the normalised name. */
export type AcceptedEntry = {
  parents: string[];
  name: string;
  /** Symlinks: the target as it will be written. Hard links: the normalised archive path they link to. */
  linkTarget?: string;
};

type Kind = "file" | "directory" | "symlink";

/**
 * Tracks what an archive has declared so far and refuses entries that would not extract to exactly what
 * was validated: devices and fifos, duplicates, a file where a directory is (or the reverse), any entry
 * whose path goes through a symbolic link (that is how a link lets a later entry write elsewhere), absolute
 * or escaping link targets, and hard links to anything but an earlier file of the same archive.
 * Symlinks are checked once more against the final skill folder by `assertLinksInside`.
 */
export class EntryTree {
  private readonly kinds = new Map<string, Kind>();

  /** Validates one entry. Returns null when the entry is the root or a directory already present. */
  accept(entry: ArchiveEntry): AcceptedEntry | null {
    const name = normaliseEntryName(entry.name);
    switch (entry.type) {
      case "device":
        throw hostile(entry.name, "device files are not allowed");
      case "fifo":
        throw hostile(entry.name, "fifos are not allowed");
      case "other":
        throw hostile(entry.name, "special files are not allowed");
      case "file":
      case "directory":
      case "symlink":
      case "hardlink":
        break;
    }
    if (name === null) {
      if (entry.type !== "directory") throw hostile(entry.name, "entry without a name");
      return null;
    }
    const parents: string[] = [];
    const segments = name.split("/");
    for (let depth = 1; depth < segments.length; depth += 1) {
      const parent = segments.slice(0, depth).join("/");
      const kind = this.kinds.get(parent);
      if (kind === "file") throw hostile(entry.name, "a parent path is a file");
      if (kind === "symlink") throw hostile(entry.name, "a parent path is a symbolic link");
      if (!kind) {
        this.kinds.set(parent, "directory");
        parents.push(parent);
      }
    }
    const existing = this.kinds.get(name);
    if (entry.type === "directory") {
      if (existing === "file" || existing === "symlink") {
        throw hostile(entry.name, "directory replaces a file");
      }
      // Its parents were registered with it, so there is nothing new to create.
      if (existing === "directory") return null;
      this.kinds.set(name, "directory");
      return { parents, name };
    }
    if (existing) {
      throw hostile(entry.name, existing === "directory" ? "file replaces a directory" : "duplicate entry");
    }
    if (entry.type === "symlink") {
      const linkTarget = symlinkTarget(entry.name, name, entry.linkTarget ?? "");
      this.kinds.set(name, "symlink");
      return { parents, name, linkTarget };
    }
    if (entry.type === "hardlink") {
      const linkTarget = normaliseLinkName(entry.name, entry.linkTarget ?? "");
      if (this.kinds.get(linkTarget) !== "file") {
        throw hostile(entry.name, "hard link target is not an earlier file of the archive");
      }
      this.kinds.set(name, "file");
      return { parents, name, linkTarget };
    }
    this.kinds.set(name, "file");
    return { parents, name };
  }
}

const MAX_LINK_TARGET_CHARS = 1024;

/** A symlink's target, checked lexically: relative, no control characters, not leaving the archive root. */
function symlinkTarget(raw: string, name: string, target: string): string {
  if (target === "") throw hostile(raw, "symbolic link without a target");
  if (target.length > MAX_LINK_TARGET_CHARS) throw hostile(raw, "link target too long");
  if (CONTROL_CHARACTERS.test(target)) throw hostile(raw, "control character in link target");
  if (target.includes("\\")) throw hostile(raw, "backslash in link target");
  if (target.startsWith("/") || /^[A-Za-z]:/.test(target)) {
    throw hostile(raw, "symbolic link to an absolute path");
  }
  const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(name), target));
  if (resolved === ".." || resolved.startsWith("../")) {
    throw hostile(raw, "symbolic link points outside the archive");
  }
  return target;
}

function normaliseLinkName(raw: string, target: string): string {
  try {
    const name = normaliseEntryName(target);
    if (name !== null) return name;
  } catch {
    // Reported below with the link's own name, which is what the caller can find in the archive.
  }
  throw hostile(raw, "hard link target is not an earlier file of the archive");
}

export type ExtractedSymlink = { path: string; target: string };

/**
 * Symlinks must resolve inside the skill folder that is kept (`root`, "" for the archive root), since
 * everything else of the archive is discarded and the folder is moved next to other skills. The target is
 * resolved component by component and may not pass through another symlink: lexical `..` after a link is
 * where lexical and kernel resolution differ (`a -> .` then `a/../..`). Links outside `root` are ignored.
 */
export function assertLinksInside(links: readonly ExtractedSymlink[], root: string): void {
  const prefix = root ? `${root}/` : "";
  const linkPaths = new Set(links.map((link) => link.path));
  const rootDepth = root ? root.split("/").length : 0;
  for (const link of links) {
    if (!link.path.startsWith(prefix)) continue;
    const stack = path.posix
      .dirname(link.path)
      .split("/")
      .filter((segment) => segment && segment !== ".");
    const components = link.target.split("/").filter((segment) => segment && segment !== ".");
    components.forEach((component, index) => {
      // The walk starts inside root (the link lives there), so it leaves root exactly when `..` pops it.
      if (component === "..") {
        if (stack.length <= rootDepth) {
          throw hostile(link.path, "symbolic link points outside the skill folder");
        }
        stack.pop();
      } else {
        stack.push(component);
      }
      if (index < components.length - 1 && linkPaths.has(stack.join("/"))) {
        throw hostile(link.path, "symbolic link target passes through another link");
      }
    });
  }
}
