import type { TenantScope } from "@/server/auth/scope";
import type { DbClient } from "@/server/db";
import { workspaceUserOf } from "@/server/modules/session/session.policy";
import { AppError } from "@/server/shared/errors";
import { listWorkspaceIdsOfUserSessions, userHasSessionOnWorkspace } from "./workspace-access.data";
import type { WorkspaceDTO } from "./workspace.types";

/**
 * Who may act on which workspace inside a tenant (the tenant filter has already held):
 * - admins and owners: every workspace of the tenant;
 * - viewers: read every workspace (their role is the tenant's read-only one; they change nothing);
 * - members: only the workspaces of their own sessions (a session they opened, or one opened by an API key
 *   they created, since a key acts as its creator) and the PER_USER workspaces derived for them. Another
 *   member's workspace answers NOT_FOUND, as another tenant's does: its existence is not disclosed.
 */
function isLimitedToOwnWorkspaces(scope: TenantScope): boolean {
  return scope.role === "member";
}

async function mayActOnWorkspace(scope: TenantScope, record: WorkspaceDTO, db: DbClient): Promise<boolean> {
  if (!isLimitedToOwnWorkspaces(scope)) return true;
  if (record.userId !== null && record.userId === workspaceUserOf(scope)) return true;
  return scope.userId !== null && userHasSessionOnWorkspace(scope, record.id, scope.userId, db);
}

export async function assertMayActOnWorkspace(
  scope: TenantScope,
  record: WorkspaceDTO,
  db: DbClient,
): Promise<void> {
  if (await mayActOnWorkspace(scope, record, db)) return;
  throw new AppError("NOT_FOUND", `workspace ${record.id} is not one of the caller's sessions'`, {
    userMessage: "Workspace not found.",
  });
}

/** For listings: null (no limit) or what a member may see, as a filter the data layer applies. */
export async function workspaceListLimit(
  scope: TenantScope,
  db: DbClient,
): Promise<{ workspaceIds: string[]; workspaceUser: string } | null> {
  if (!isLimitedToOwnWorkspaces(scope)) return null;
  return {
    workspaceIds: scope.userId ? await listWorkspaceIdsOfUserSessions(scope, scope.userId, db) : [],
    workspaceUser: workspaceUserOf(scope),
  };
}

/**
 * Whether a workspace is one the scope may list (the change feed asks it for each change it would tell):
 * as `assertMayActOnWorkspace`, from the workspace's id and derived user alone.
 */
export async function mayListWorkspace(
  scope: TenantScope,
  workspace: { id: string; userId: string | null },
  db: DbClient,
): Promise<boolean> {
  if (!isLimitedToOwnWorkspaces(scope)) return true;
  if (workspace.userId !== null && workspace.userId === workspaceUserOf(scope)) return true;
  return scope.userId !== null && userHasSessionOnWorkspace(scope, workspace.id, scope.userId, db);
}
