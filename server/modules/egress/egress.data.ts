import type { DbClient } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import type { EgressMode, Prisma } from "@/generated/prisma/client";
import type { EgressRuleRow, EgressSecretView, RefusedEntry } from "./egress.types";

/**
 * The only Prisma importer of the egress module. `agentKey` is "" for the tenant's own policy and secrets,
 * else the agent's id (egress.prisma). Every function takes the database client explicitly.
 */

const secretView = { id: true, name: true, hint: true, hosts: true, agentId: true, createdAt: true } as const;

export async function readEgressPolicy(
  scope: TenantScope,
  agentKey: string,
  db: DbClient,
): Promise<{ mode: EgressMode; allow: unknown } | null> {
  return db.egressPolicy.findUnique({
    where: { tenantId_agentKey: { tenantId: scope.tenantId, agentKey } },
    select: { mode: true, allow: true },
  });
}

export async function writeEgressPolicy(
  scope: TenantScope,
  agentKey: string,
  policy: { mode: EgressMode; allow: EgressRuleRow[] },
  db: DbClient,
): Promise<void> {
  const allow = policy.allow as unknown as Prisma.InputJsonValue;
  await db.egressPolicy.upsert({
    where: { tenantId_agentKey: { tenantId: scope.tenantId, agentKey } },
    create: { tenantId: scope.tenantId, agentKey, agentId: agentKey || null, mode: policy.mode, allow },
    update: { mode: policy.mode, allow },
  });
}

/** True when the agent is the tenant's (agent-level rows are only written for one). */
export async function agentOfTenant(scope: TenantScope, agentId: string, db: DbClient): Promise<boolean> {
  return (await db.agent.count({ where: { id: agentId, tenantId: scope.tenantId } })) > 0;
}

export async function listEgressSecrets(
  scope: TenantScope,
  agentKey: string,
  db: DbClient,
): Promise<EgressSecretView[]> {
  const rows = await db.egressSecret.findMany({
    where: { tenantId: scope.tenantId, agentKey },
    orderBy: { name: "asc" },
    select: secretView,
  });
  return rows.map((row) => ({ ...row, hosts: row.hosts as string[] }));
}

export async function insertEgressSecret(
  scope: TenantScope,
  row: { id: string; agentKey: string; name: string; valueSealed: string; hint: string; hosts: string[] },
  db: DbClient,
): Promise<EgressSecretView> {
  const created = await db.egressSecret.create({
    data: { ...row, tenantId: scope.tenantId, agentId: row.agentKey || null },
    select: secretView,
  });
  return { ...created, hosts: created.hosts as string[] };
}

export async function deleteEgressSecret(
  scope: TenantScope,
  agentKey: string,
  id: string,
  db: DbClient,
): Promise<boolean> {
  const { count } = await db.egressSecret.deleteMany({ where: { id, tenantId: scope.tenantId, agentKey } });
  return count > 0;
}

/** The sealed secrets a turn of `agentId` may use: the tenant's and the agent's (the agent's win by name). */
export async function sealedSecretsForAgent(
  scope: TenantScope,
  agentId: string,
  db: DbClient,
): Promise<Array<{ id: string; agentKey: string; name: string; valueSealed: string; hosts: unknown }>> {
  return db.egressSecret.findMany({
    where: { tenantId: scope.tenantId, agentKey: { in: ["", agentId] } },
    select: { id: true, agentKey: true, name: true, valueSealed: true, hosts: true },
  });
}

/** Counts one refusal and keeps the newest `keep` of them, in one statement (no lost update under races). */
export async function recordEgressRefusal(
  scope: TenantScope,
  workspaceId: string,
  entry: RefusedEntry,
  keep: number,
  db: DbClient,
): Promise<void> {
  const json = JSON.stringify([entry]);
  await db.$executeRaw`
    INSERT INTO workspace_egress_stats (workspace_id, tenant_id, refused_count, last_refused, updated_at)
    SELECT ${workspaceId}, ${scope.tenantId}, 1, ${json}::jsonb, now()
    WHERE EXISTS (SELECT 1 FROM workspaces WHERE id = ${workspaceId} AND tenant_id = ${scope.tenantId})
    ON CONFLICT (workspace_id) DO UPDATE SET
      refused_count = workspace_egress_stats.refused_count + 1,
      last_refused = (
        SELECT coalesce(jsonb_agg(e ORDER BY i), '[]'::jsonb) FROM (
          SELECT e, i FROM jsonb_array_elements(${json}::jsonb || workspace_egress_stats.last_refused)
            WITH ORDINALITY AS t(e, i) ORDER BY i LIMIT ${keep}
        ) newest
      ),
      updated_at = now()
    WHERE workspace_egress_stats.tenant_id = ${scope.tenantId}`;
}

export async function readEgressStats(
  scope: TenantScope,
  workspaceId: string,
  db: DbClient,
): Promise<{ refusedCount: number; lastRefused: unknown } | null> {
  return db.workspaceEgressStats.findFirst({
    where: { workspaceId, tenantId: scope.tenantId },
    select: { refusedCount: true, lastRefused: true },
  });
}

export async function clearEgressPolicy(scope: TenantScope, agentKey: string, db: DbClient): Promise<void> {
  await db.egressPolicy.deleteMany({ where: { tenantId: scope.tenantId, agentKey } });
}
