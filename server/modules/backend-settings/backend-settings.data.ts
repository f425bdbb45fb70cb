import type { Prisma } from "@/generated/prisma/client";
import type { TenantScope } from "@/server/auth/scope";
import { type DbClient, getDb } from "@/server/db";

/** The only Prisma importer of the backend-settings module. Tenant calls take a scope; the drivers' reads ids. */

export type BackendSettingsRow = {
  settings: Prisma.JsonValue;
  secretSealed: string | null;
  secretHint: string | null;
  updatedAt: Date;
};

const rowView = { settings: true, secretSealed: true, secretHint: true, updatedAt: true } as const;

export async function findBackendSettings(
  tenantId: string,
  backend: string,
  db: DbClient = getDb(),
): Promise<BackendSettingsRow | null> {
  return db.tenantBackendSettings.findUnique({
    where: { tenantId_backend: { tenantId, backend } },
    select: rowView,
  });
}

export async function upsertBackendSettings(
  scope: TenantScope,
  backend: string,
  row: { settings: Record<string, unknown>; secretSealed: string | null; secretHint: string | null },
  db: DbClient = getDb(),
): Promise<BackendSettingsRow> {
  // The settings were validated by their driver's schema (strings and numbers): JSON as they are.
  const data = { ...row, settings: row.settings as Prisma.InputJsonObject, updatedBy: scope.userId };
  return db.tenantBackendSettings.upsert({
    where: { tenantId_backend: { tenantId: scope.tenantId, backend } },
    create: { tenantId: scope.tenantId, backend, ...data },
    update: data,
    select: rowView,
  });
}

export async function deleteBackendSettings(
  scope: TenantScope,
  backend: string,
  db: DbClient = getDb(),
): Promise<boolean> {
  const { count } = await db.tenantBackendSettings.deleteMany({
    where: { tenantId: scope.tenantId, backend },
  });
  return count > 0;
}

/** Tenants with settings of `backend` that are not suspended or being deleted. */
export async function tenantsWithBackendSettings(backend: string, db: DbClient = getDb()): Promise<string[]> {
  const rows = await db.tenantBackendSettings.findMany({
    where: { backend, tenant: { status: "active" } },
    select: { tenantId: true },
  });
  return rows.map((row) => row.tenantId);
}
