import { type DbClient, getDb } from "@/server/db";
import type { TenantRole } from "@/server/auth/roles";

/**
 * The queries auth gates run BEFORE a TenantScope exists (they are what mints one). Nothing else
 * may use them: every other data function takes a scope.
 */

export type GateMembership = { tenantId: string; tenantSlug: string; role: TenantRole };

/** The user's membership in the tenant named by id or slug, or null. */
export async function findMembershipForGate(
  tenantIdOrSlug: string,
  userId: string,
  db: DbClient = getDb(),
): Promise<GateMembership | null> {
  const row = await db.membership.findFirst({
    where: { userId, tenant: { OR: [{ id: tenantIdOrSlug }, { slug: tenantIdOrSlug }] } },
    select: { tenantId: true, role: true, tenant: { select: { slug: true } } },
  });
  return row ? { tenantId: row.tenantId, tenantSlug: row.tenant.slug, role: row.role } : null;
}

export type GateApiKey = {
  id: string;
  tenantId: string;
  role: TenantRole;
  createdByUserId: string | null;
  usable: boolean;
};

/** Berth's columns of an API key the plugin has already verified (role, creator, revocation). */
export async function findApiKeyForGate(
  apiKeyId: string,
  db: DbClient = getDb(),
): Promise<GateApiKey | null> {
  const row = await db.apiKey.findFirst({
    where: { id: apiKeyId },
    select: {
      id: true,
      tenantId: true,
      role: true,
      createdByUserId: true,
      enabled: true,
      revokedAt: true,
      expiresAt: true,
    },
  });
  if (!row) return null;
  const expired = row.expiresAt !== null && row.expiresAt.getTime() <= Date.now();
  return {
    id: row.id,
    tenantId: row.tenantId,
    role: row.role,
    createdByUserId: row.createdByUserId,
    usable: row.enabled !== false && row.revokedAt === null && !expired,
  };
}

/** The tenant id for an id or slug, or null. */
export async function findTenantIdForGate(
  tenantIdOrSlug: string,
  db: DbClient = getDb(),
): Promise<string | null> {
  const row = await db.tenant.findFirst({
    where: { OR: [{ id: tenantIdOrSlug }, { slug: tenantIdOrSlug }] },
    select: { id: true },
  });
  return row?.id ?? null;
}
