import { z } from "zod";
import { type DbClient } from "@/server/db";
import type { TenantRole } from "@/server/auth/roles";

/**
 * The queries auth gates run BEFORE a TenantScope exists (they are what mints one). Nothing else
 * may use them: every other data function takes a scope.
 */

/** A tenant's operator lifecycle state (prisma/operator.prisma): only `active` tenants admit callers. */
export type GateTenantStatus = "active" | "suspended" | "deleting";

export type GateMembership = {
  tenantId: string;
  tenantSlug: string;
  tenantStatus: GateTenantStatus;
  role: TenantRole;
};

/** The user's membership in the tenant named by id or slug, or null. */
export async function findMembershipForGate(
  tenantIdOrSlug: string,
  userId: string,
  db: DbClient,
): Promise<GateMembership | null> {
  const row = await db.membership.findFirst({
    where: { userId, tenant: { OR: [{ id: tenantIdOrSlug }, { slug: tenantIdOrSlug }] } },
    select: { tenantId: true, role: true, tenant: { select: { slug: true, status: true } } },
  });
  return row
    ? { tenantId: row.tenantId, tenantSlug: row.tenant.slug, tenantStatus: row.tenant.status, role: row.role }
    : null;
}

export type GateApiKey = {
  id: string;
  tenantId: string;
  role: TenantRole;
  createdByUserId: string | null;
  usable: boolean;
};

/** Berth's columns of an API key the plugin has already verified (role, creator, revocation). */
export async function findApiKeyForGate(apiKeyId: string, db: DbClient): Promise<GateApiKey | null> {
  const row = await db.apiKey.findFirst({ where: { id: apiKeyId }, select: gateKeySelect });
  return row ? toGateApiKey(row) : null;
}

/** The tenant (id and status) for an id or slug, or null. */
export async function findTenantForGate(
  tenantIdOrSlug: string,
  db: DbClient,
): Promise<{ id: string; status: GateTenantStatus } | null> {
  return db.tenant.findFirst({
    where: { OR: [{ id: tenantIdOrSlug }, { slug: tenantIdOrSlug }] },
    select: { id: true, status: true },
  });
}

const gateKeySelect = {
  id: true,
  tenantId: true,
  role: true,
  createdByUserId: true,
  enabled: true,
  revokedAt: true,
  expiresAt: true,
} as const;

function toGateApiKey(row: {
  id: string;
  tenantId: string;
  role: TenantRole;
  createdByUserId: string | null;
  enabled: boolean | null;
  revokedAt: Date | null;
  expiresAt: Date | null;
}): GateApiKey {
  const expired = row.expiresAt !== null && row.expiresAt.getTime() <= Date.now();
  return {
    id: row.id,
    tenantId: row.tenantId,
    role: row.role,
    createdByUserId: row.createdByUserId,
    usable: row.enabled !== false && row.revokedAt === null && !expired,
  };
}

/** An API key by the hash stored for it (better-auth's api-key plugin's `key` column), with its last use. */
export async function findApiKeyByHashForGate(
  keyHash: string,
  db: DbClient,
): Promise<(GateApiKey & { lastUsedAt: Date | null }) | null> {
  const row = await db.apiKey.findUnique({
    where: { key: keyHash },
    select: { ...gateKeySelect, configId: true, lastUsedAt: true },
  });
  if (!row || row.configId !== "default") return null;
  return { ...toGateApiKey(row), lastUsedAt: row.lastUsedAt };
}

/**
 * What opening a tenant with an API key needs, read in ONE statement: the key, whether the tenant named
 * by id or slug is the key's own, and the creator's current role there (null when the creator left).
 */
export type GateApiKeyTenant = GateApiKey & {
  tenantMatches: boolean;
  tenantStatus: GateTenantStatus;
  creatorRole: TenantRole | null;
};

const ZRole = z.enum(["owner", "admin", "member", "viewer"]);
const ZKeyTenantRow = z.object({
  id: z.string(),
  tenant_id: z.string(),
  role: ZRole,
  created_by_user_id: z.string().nullable(),
  enabled: z.boolean().nullable(),
  revoked_at: z.date().nullable(),
  expires_at: z.date().nullable(),
  tenant_matches: z.boolean(),
  tenant_status: z.enum(["active", "suspended", "deleting"]),
  creator_role: ZRole.nullable(),
});

export async function findApiKeyTenantForGate(
  apiKeyId: string,
  tenantIdOrSlug: string,
  db: DbClient,
): Promise<GateApiKeyTenant | null> {
  const rows = await db.$queryRaw<unknown[]>`
    SELECT k.id, k.tenant_id, k.role::text AS role, k.created_by_user_id, k.enabled, k.revoked_at,
           k.expires_at, (t.id = ${tenantIdOrSlug} OR t.slug = ${tenantIdOrSlug}) AS tenant_matches,
           t.status::text AS tenant_status, m.role::text AS creator_role
      FROM api_keys k
      JOIN tenants t ON t.id = k.tenant_id
      LEFT JOIN memberships m ON m.tenant_id = k.tenant_id AND m.user_id = k.created_by_user_id
     WHERE k.id = ${apiKeyId}`;
  if (rows.length === 0) return null;
  const row = ZKeyTenantRow.parse(rows[0]);
  return {
    ...toGateApiKey({
      id: row.id,
      tenantId: row.tenant_id,
      role: row.role,
      createdByUserId: row.created_by_user_id,
      enabled: row.enabled,
      revokedAt: row.revoked_at,
      expiresAt: row.expires_at,
    }),
    tenantMatches: row.tenant_matches,
    tenantStatus: row.tenant_status,
    creatorRole: row.creator_role,
  };
}

/**
 * Records a key's use at `at` unless a concurrent request already recorded one within `granularityMs`:
 * the condition makes racing requests write once, and the caller skips the statement entirely when the
 * row it just read is recent enough.
 */
export async function touchApiKeyForGate(
  apiKeyId: string,
  at: Date,
  granularityMs: number,
  db: DbClient,
): Promise<void> {
  await db.apiKey.updateMany({
    where: {
      id: apiKeyId,
      OR: [{ lastUsedAt: null }, { lastUsedAt: { lt: new Date(at.getTime() - granularityMs) } }],
    },
    data: { lastUsedAt: at },
  });
}

/** The user with this email (case-insensitive) and the tenants they belong to, for auditing a sign-in. */
export async function findUserTenantsByEmailForGate(
  email: string,
  db: DbClient,
): Promise<{ userId: string; tenantIds: string[] } | null> {
  const user = await db.user.findFirst({
    where: { email: { equals: email, mode: "insensitive" } },
    select: { id: true, memberships: { select: { tenantId: true } } },
  });
  return user ? { userId: user.id, tenantIds: user.memberships.map((m) => m.tenantId) } : null;
}
