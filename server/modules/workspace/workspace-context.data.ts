import { z } from "zod";
import type { TenantScope } from "@/server/auth/scope";
import { type DbClient } from "@/server/db";
import { ZBackendKind, ZIsolationPolicy } from "@/server/modules/agent/agent.types";
import { AppError } from "@/server/shared/errors";

/**
 * Reads that need a tenant's settings next to one of its agents, in ONE statement each: Prisma loads a
 * relation with a second query, and these run on every `session.create` and `workspace.get`.
 */

/** What a new session's workspace is decided from: the agent's own choices, then the tenant's defaults. */
export type WorkspaceDefaults = {
  agent: {
    id: string;
    isolationPolicy: z.infer<typeof ZIsolationPolicy> | null;
    backend: z.infer<typeof ZBackendKind> | null;
  };
  tenant: {
    defaultIsolationPolicy: z.infer<typeof ZIsolationPolicy> | null;
    defaultBackend: z.infer<typeof ZBackendKind> | null;
  };
};

const ZDefaultsRow = z.object({
  id: z.string(),
  isolation_policy: ZIsolationPolicy.nullable(),
  backend: ZBackendKind.nullable(),
  default_isolation_policy: ZIsolationPolicy.nullable(),
  default_backend: ZBackendKind.nullable(),
});

/** Null: the tenant has no such agent. */
export async function readWorkspaceDefaults(
  scope: TenantScope,
  agentId: string,
  db: DbClient,
): Promise<WorkspaceDefaults | null> {
  const rows = await db.$queryRaw<unknown[]>`
    SELECT a.id, a.isolation_policy::text AS isolation_policy, a.backend::text AS backend,
           t.default_isolation_policy::text AS default_isolation_policy,
           t.default_backend::text AS default_backend
      FROM agents a
      JOIN tenants t ON t.id = a.tenant_id
     WHERE a.tenant_id = ${scope.tenantId} AND a.id = ${agentId}`;
  if (rows.length === 0) return null;
  const row = ZDefaultsRow.parse(rows[0]);
  return {
    agent: { id: row.id, isolationPolicy: row.isolation_policy, backend: row.backend },
    tenant: { defaultIsolationPolicy: row.default_isolation_policy, defaultBackend: row.default_backend },
  };
}

/** What a workspace's page shows besides its record: its agent's name and the tenant's idle TTL. */
export type WorkspacePageContext = { agentName: string | null; tenantIdleTtlMs: number | null };

const ZPageContextRow = z.object({
  agent_name: z.string().nullable(),
  workspace_idle_ttl_ms: z.number().int().nullable(),
});

export async function readWorkspacePageContext(
  scope: TenantScope,
  agentId: string | null,
  db: DbClient,
): Promise<WorkspacePageContext> {
  // LEFT JOIN: a workspace without an agent (or whose agent is gone) still has its tenant's TTL.
  const rows = await db.$queryRaw<unknown[]>`
    SELECT a.name AS agent_name, t.workspace_idle_ttl_ms
      FROM tenants t
      LEFT JOIN agents a ON a.tenant_id = t.id AND a.id = ${agentId}
     WHERE t.id = ${scope.tenantId}`;
  if (rows.length === 0)
    throw new AppError("NOT_FOUND", `tenant ${scope.tenantId} not found`, {
      userMessage: "Tenant not found.",
    });
  const row = ZPageContextRow.parse(rows[0]);
  return { agentName: row.agent_name, tenantIdleTtlMs: row.workspace_idle_ttl_ms };
}
