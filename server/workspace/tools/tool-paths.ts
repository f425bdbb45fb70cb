import path from "node:path";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { parseWorkspaceReference, WORKSPACE_SCHEME } from "@/server/workspace/offload/references";

/**
 * The path a file tool was given, with offload references mapped: the offloader tells the model where it
 * parked a tool result or older context as `workspace:///sessions/<sid>/…`, so the tools that read (Read,
 * Grep, Glob) accept that form and turn it into the absolute path under the workdir. The reference is
 * parsed strictly (no `..`, no absolute path after the scheme) and the result is still confined by the
 * tool's own `resolveConfined`, so a reference never reaches further than a plain path would.
 */
export function toolPathOf(machine: WorkspaceMachine, given: string): string {
  if (!given.startsWith(WORKSPACE_SCHEME)) return given;
  return path.posix.join(machine.workdir, parseWorkspaceReference(given));
}
