import type { TenantRole } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import { type DbClient, getDb } from "@/server/db";
import { AppError } from "@/server/shared/errors";
import type { TenantPolicyDTO } from "./tenant-policy.types";

export async function getTenantPolicy(scope: TenantScope, db: DbClient = getDb()): Promise<TenantPolicyDTO> {
  const row = await db.tenant.findFirst({
    where: { id: scope.tenantId },
    select: { stdioMcpMinRole: true },
  });
  if (!row)
    throw new AppError("NOT_FOUND", `tenant ${scope.tenantId} not found`, {
      userMessage: "Tenant not found.",
    });
  return { stdioMcpMinRole: row.stdioMcpMinRole };
}

export async function updateTenantPolicy(
  scope: TenantScope,
  patch: { stdioMcpMinRole?: Exclude<TenantRole, "viewer"> },
  db: DbClient = getDb(),
): Promise<TenantPolicyDTO> {
  const row = await db.tenant.update({
    where: { id: scope.tenantId },
    data: { ...(patch.stdioMcpMinRole ? { stdioMcpMinRole: patch.stdioMcpMinRole } : {}) },
    select: { stdioMcpMinRole: true },
  });
  return { stdioMcpMinRole: row.stdioMcpMinRole };
}
