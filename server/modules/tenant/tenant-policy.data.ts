import type { TenantRole } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import { type DbClient } from "@/server/db";
import type { IsolationPolicy } from "@/server/modules/agent/agent.types";
import { AppError } from "@/server/shared/errors";
import type { TenantPolicyDTO } from "./tenant-policy.types";

const policySelect = {
  stdioMcpMinRole: true,
  defaultIsolationPolicy: true,
  workspaceIdleTtlMs: true,
  checkpointKeepTurns: true,
  checkpointKeepDays: true,
  checkpointStorageBytes: true,
} as const;

function toPolicy(row: {
  stdioMcpMinRole: TenantPolicyDTO["stdioMcpMinRole"];
  defaultIsolationPolicy: IsolationPolicy | null;
  workspaceIdleTtlMs: number | null;
  checkpointKeepTurns: number | null;
  checkpointKeepDays: number | null;
  checkpointStorageBytes: bigint | null;
}): TenantPolicyDTO {
  return {
    ...row,
    checkpointStorageBytes: row.checkpointStorageBytes === null ? null : Number(row.checkpointStorageBytes),
  };
}

export async function getTenantPolicy(scope: TenantScope, db: DbClient): Promise<TenantPolicyDTO> {
  const row = await db.tenant.findFirst({ where: { id: scope.tenantId }, select: policySelect });
  if (!row)
    throw new AppError("NOT_FOUND", `tenant ${scope.tenantId} not found`, {
      userMessage: "Tenant not found.",
    });
  return toPolicy(row);
}

/** Absent fields keep their values; null clears a default (back to the installation's). */
export async function updateTenantPolicy(
  scope: TenantScope,
  patch: {
    stdioMcpMinRole?: Exclude<TenantRole, "viewer">;
    defaultIsolationPolicy?: IsolationPolicy | null;
    workspaceIdleTtlMs?: number | null;
    checkpointKeepTurns?: number | null;
    checkpointKeepDays?: number | null;
    checkpointStorageBytes?: number | null;
  },
  db: DbClient,
): Promise<TenantPolicyDTO> {
  const { checkpointKeepTurns, checkpointKeepDays, checkpointStorageBytes } = patch;
  const row = await db.tenant.update({
    where: { id: scope.tenantId },
    data: {
      ...(patch.stdioMcpMinRole ? { stdioMcpMinRole: patch.stdioMcpMinRole } : {}),
      ...(patch.defaultIsolationPolicy !== undefined
        ? { defaultIsolationPolicy: patch.defaultIsolationPolicy }
        : {}),
      ...(patch.workspaceIdleTtlMs !== undefined ? { workspaceIdleTtlMs: patch.workspaceIdleTtlMs } : {}),
      ...(checkpointKeepTurns !== undefined ? { checkpointKeepTurns } : {}),
      ...(checkpointKeepDays !== undefined ? { checkpointKeepDays } : {}),
      ...(checkpointStorageBytes !== undefined
        ? { checkpointStorageBytes: checkpointStorageBytes === null ? null : BigInt(checkpointStorageBytes) }
        : {}),
    },
    select: policySelect,
  });
  return toPolicy(row);
}

/**
 * The sweep's system read across tenants: every tenant whose idle TTL is shorter than the installation's
 * (the others use the installation's, so they need no row here).
 */
export async function listTenantIdleTtlsBelow(
  installationTtlMs: number,
  db: DbClient,
): Promise<{ tenantId: string; idleTtlMs: number }[]> {
  const rows = await db.tenant.findMany({
    where: { workspaceIdleTtlMs: { lt: installationTtlMs } },
    select: { id: true, workspaceIdleTtlMs: true },
  });
  return rows.map((row) => ({ tenantId: row.id, idleTtlMs: row.workspaceIdleTtlMs! }));
}
