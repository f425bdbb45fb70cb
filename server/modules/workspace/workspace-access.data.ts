import type { TenantScope } from "@/server/auth/scope";
import { type DbClient } from "@/server/db";

/**
 * The queries behind "a member acts on the workspaces of their own sessions" (workspace-access.ts): the
 * sessions' stored workspace ids, read through the tenant filter.
 */

/** Whether the user has a session of this tenant bound to the workspace. */
export async function userHasSessionOnWorkspace(
  scope: TenantScope,
  workspaceId: string,
  userId: string,
  db: DbClient,
): Promise<boolean> {
  const row = await db.session.findFirst({
    where: { tenantId: scope.tenantId, workspaceId, userId },
    select: { id: true },
  });
  return row !== null;
}

/** The distinct workspace ids the user's sessions of this tenant are bound to. */
export async function listWorkspaceIdsOfUserSessions(
  scope: TenantScope,
  userId: string,
  db: DbClient,
): Promise<string[]> {
  const rows = await db.session.findMany({
    where: { tenantId: scope.tenantId, userId },
    select: { workspaceId: true },
    distinct: ["workspaceId"],
  });
  return rows.map((row) => row.workspaceId);
}
