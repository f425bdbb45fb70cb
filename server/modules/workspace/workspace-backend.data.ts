import type { TenantScope } from "@/server/auth/scope";
import { type DbClient } from "@/server/db";
import type { BackendKind } from "@/server/workspace/drivers/kind";

/** What a new workspace's backend is chosen from: the agent's own choice, then the tenant's default. */
export type BackendPreferences = { agent: BackendKind | null; tenant: BackendKind | null };

export async function readBackendPreferences(
  scope: TenantScope,
  agentId: string | null,
  db: DbClient,
): Promise<BackendPreferences> {
  const [tenant, agent] = await Promise.all([
    db.tenant.findFirst({ where: { id: scope.tenantId }, select: { defaultBackend: true } }),
    agentId
      ? db.agent.findFirst({ where: { id: agentId, tenantId: scope.tenantId }, select: { backend: true } })
      : null,
  ]);
  return { agent: agent?.backend ?? null, tenant: tenant?.defaultBackend ?? null };
}

export async function writeTenantDefaultBackend(
  scope: TenantScope,
  backend: BackendKind | null,
  db: DbClient,
): Promise<void> {
  await db.tenant.update({ where: { id: scope.tenantId }, data: { defaultBackend: backend } });
}
