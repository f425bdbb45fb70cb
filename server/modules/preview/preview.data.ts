import { Prisma } from "@/generated/prisma/client";
import type { TenantScope } from "@/server/auth/scope";
import type { DbClient } from "@/server/db";

/** The only Prisma importer of previews. `db` is required (no process default): callers pass the root's. */

export type PreviewDTO = { port: number; createdBy: string | null; createdAt: Date };

const SELECT = { port: true, createdBy: true, createdAt: true } as const;

export async function listWorkspacePreviews(
  db: DbClient,
  scope: TenantScope,
  workspaceId: string,
): Promise<PreviewDTO[]> {
  return db.workspacePreview.findMany({
    where: { tenantId: scope.tenantId, workspaceId },
    select: SELECT,
    orderBy: { port: "asc" },
  });
}

/**
 * Exposes a port once: a second expose (a double click, a retry) finds the row the first made, through
 * the unique (workspace, port) key, and reports `created: false`.
 */
export async function insertWorkspacePreview(
  db: DbClient,
  scope: TenantScope,
  workspaceId: string,
  port: number,
  createdBy: string | null,
): Promise<{ preview: PreviewDTO; created: boolean }> {
  try {
    const preview = await db.workspacePreview.create({
      data: { tenantId: scope.tenantId, workspaceId, port, createdBy },
      select: SELECT,
    });
    return { preview, created: true };
  } catch (error) {
    if (!(error instanceof Prisma.PrismaClientKnownRequestError) || error.code !== "P2002") throw error;
    const preview = await db.workspacePreview.findFirstOrThrow({
      where: { tenantId: scope.tenantId, workspaceId, port },
      select: SELECT,
    });
    return { preview, created: false };
  }
}

/** True when a row was deleted. */
export async function deleteWorkspacePreview(
  db: DbClient,
  scope: TenantScope,
  workspaceId: string,
  port: number,
): Promise<boolean> {
  const { count } = await db.workspacePreview.deleteMany({
    where: { tenantId: scope.tenantId, workspaceId, port },
  });
  return count > 0;
}

/**
 * What a preview request needs before any tenant is known (a share link carries none): the workspace's
 * tenant, state and owner, and whether the port is exposed. Null when the workspace does not exist.
 */
export async function findPreviewTarget(
  db: DbClient,
  workspaceId: string,
  port: number,
): Promise<{ tenantId: string; state: string; exposed: boolean } | null> {
  const row = await db.workspace.findUnique({
    where: { id: workspaceId },
    select: { tenantId: true, state: true, previews: { where: { port }, select: { id: true } } },
  });
  if (!row) return null;
  return { tenantId: row.tenantId, state: row.state, exposed: row.previews.length > 0 };
}
