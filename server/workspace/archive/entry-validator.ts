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
export function normaliseEntryName(raw: string): string | null {
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

/**
 * Tracks what an archive has declared so far and refuses entries that would not extract to exactly what
 * was validated: links of any kind (a link, even one pointing inside, lets a later entry write through it),
 * devices and fifos, duplicates, and a file where a directory is (or the reverse).
 */
export class EntryTree {
  private readonly kinds = new Map<string, "file" | "directory">();

  /**
   * Validates one entry. Returns the directories to create first (missing parents, in order) and the
   * normalised name, or null when the entry is the root or a directory already present.
   */
  accept(entry: ArchiveEntry): { parents: string[]; name: string } | null {
    const name = normaliseEntryName(entry.name);
    switch (entry.type) {
      case "symlink":
        throw hostile(entry.name, "symbolic links are not allowed");
      case "hardlink":
        throw hostile(entry.name, "hard links are not allowed");
      case "device":
        throw hostile(entry.name, "device files are not allowed");
      case "fifo":
        throw hostile(entry.name, "fifos are not allowed");
      case "other":
        throw hostile(entry.name, "special files are not allowed");
      case "file":
      case "directory":
        break;
    }
    if (name === null) {
      if (entry.type === "file") throw hostile(entry.name, "file without a name");
      return null;
    }
    const parents: string[] = [];
    const segments = name.split("/");
    for (let depth = 1; depth < segments.length; depth += 1) {
      const parent = segments.slice(0, depth).join("/");
      const kind = this.kinds.get(parent);
      if (kind === "file") throw hostile(entry.name, "a parent path is a file");
      if (!kind) {
        this.kinds.set(parent, "directory");
        parents.push(parent);
      }
    }
    const existing = this.kinds.get(name);
    if (entry.type === "directory") {
      if (existing === "file") throw hostile(entry.name, "directory replaces a file");
      // Its parents were registered with it, so there is nothing new to create.
      if (existing === "directory") return null;
      this.kinds.set(name, "directory");
      return { parents, name };
    }
    if (existing)
      throw hostile(entry.name, existing === "file" ? "duplicate entry" : "file replaces a directory");
    this.kinds.set(name, "file");
    return { parents, name };
  }
}
