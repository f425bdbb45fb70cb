import type { TenantScope } from "@/server/auth/scope";
import { type DbClient } from "@/server/db";

/** The tombstones of sessions deleted with their agent (what a client still holding an id is told). */

export async function recordDeletedSessions(
  scope: TenantScope,
  input: { agentId: string; agentName: string; sessionIds: readonly string[] },
  db: DbClient,
): Promise<void> {
  if (input.sessionIds.length === 0) return;
  await db.deletedSession.createMany({
    data: input.sessionIds.map((sessionId) => ({
      sessionId,
      tenantId: scope.tenantId,
      agentId: input.agentId,
      agentName: input.agentName,
    })),
    skipDuplicates: true,
  });
}

export async function findDeletedSession(
  scope: TenantScope,
  sessionId: string,
  db: DbClient,
): Promise<{ agentId: string; agentName: string; deletedAt: Date } | null> {
  return db.deletedSession.findFirst({
    where: { tenantId: scope.tenantId, sessionId },
    select: { agentId: true, agentName: true, deletedAt: true },
  });
}
