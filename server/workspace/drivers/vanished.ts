import { AppError, isAppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";

/**
 * A machine whose files vanished behind Berth's back (its host folder deleted, its sandbox gone). Whoever
 * notices on use says so with `workspaceVanished` instead of the error the missing folder happens to cause
 * ("path . resolves outside the workspace", `spawn /bin/sh ENOENT`), and marks the backend: the manager then
 * re-checks liveness on the next use instead of waiting for its interval, replaces the workspace, and the
 * workers record a `data_lost` event when they provision it again (issue 11).
 */
const WORKSPACE_VANISHED = "workspace_vanished";
/** The E2B driver's reason for an attach that found no sandbox (kept: clients may read it). */
const SANDBOX_MISSING = "sandbox_missing";

const vanished = new WeakSet<WorkspaceMachine>();

/**
 * CONFLICT (409, so the message reaches the caller: the request was fine, the workspace is not), with
 * `details.reason` `workspace_vanished`. Marks `backend` (when given) as vanished.
 */
export function workspaceVanished(machine?: WorkspaceMachine, cause?: unknown): AppError {
  if (machine) vanished.add(machine);
  return new AppError("CONFLICT", "the workspace's files are gone: its folder or machine vanished", {
    cause,
    userMessage:
      "This workspace's files are gone (its folder or machine was removed outside Berth). It is provisioned again, empty, on the next use: retry.",
    details: { reason: WORKSPACE_VANISHED },
  });
}

/** True once an operation on `backend` found its files gone (see workspaceVanished). */
export function hasVanished(machine: WorkspaceMachine): boolean {
  return vanished.has(machine);
}

/** An attach or operation failed because the machine itself is gone (not a passing fault). */
export function isMachineGone(error: unknown): boolean {
  if (!isAppError(error)) return false;
  const reason = error.details?.reason;
  return reason === WORKSPACE_VANISHED || reason === SANDBOX_MISSING;
}
