import path from "node:path";
import type { Readable } from "node:stream";
import { AppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { resolveConfined } from "@/server/workspace/paths";

/**
 * `workspace:///<path>` references (three slashes: an empty authority, a path relative to the workspace
 * root), the reference system's URL form for offloaded data. Berth uses them for every offloaded file.
 */
export const WORKSPACE_SCHEME = "workspace://";

/** Builds a reference from a workdir-relative POSIX path. Segments are percent-encoded like a URL path. */
export function toWorkspaceReference(relativePath: string): string {
  return `${WORKSPACE_SCHEME}/${relativePath.split("/").map(encodeURIComponent).join("/")}`;
}

/** The workdir-relative path a reference names. BAD_REQUEST for anything that is not a workspace reference. */
export function parseWorkspaceReference(reference: string): string {
  if (!reference.startsWith(`${WORKSPACE_SCHEME}/`)) {
    throw new AppError("BAD_REQUEST", `Not a workspace reference: ${reference}`, {
      userMessage: "Expected a reference of the form workspace:///<path>",
    });
  }
  let decoded: string;
  try {
    decoded = reference
      .slice(WORKSPACE_SCHEME.length + 1)
      .split("/")
      .map(decodeURIComponent)
      .join("/");
  } catch (error) {
    throw new AppError("BAD_REQUEST", `Malformed workspace reference: ${reference}`, { cause: error });
  }
  const normalised = path.posix.normalize(decoded);
  if (decoded.length === 0 || normalised.startsWith("..") || path.posix.isAbsolute(normalised)) {
    throw new AppError("FORBIDDEN", `Workspace reference escapes the workspace: ${reference}`);
  }
  return normalised;
}

/** Streams the file a reference names, confined to the workdir (no `..`, no symlink escape). */
export async function openWorkspaceReference(
  machine: WorkspaceMachine,
  reference: string,
): Promise<Readable> {
  const relative = parseWorkspaceReference(reference);
  const target = await resolveConfined(machine, path.posix.join(machine.workdir, relative));
  return machine.readFile(target);
}
