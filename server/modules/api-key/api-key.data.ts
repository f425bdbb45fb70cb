import type { Prisma } from "@/generated/prisma/client";
import { type DbClient, pageSize } from "@/server/db";
import type { TenantRole } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import type { ApiKeyDTO } from "@/server/modules/api-key/api-key.types";

// Never selects `key` (the hash) or the plugin's rate-limit bookkeeping.
const apiKeySelect = {
  id: true,
  name: true,
  start: true,
  role: true,
  createdByUserId: true,
  mintedByApiKeyId: true,
  createdAt: true,
  lastUsedAt: true,
  expiresAt: true,
  revokedAt: true,
} satisfies Prisma.ApiKeySelect;

export async function listApiKeys(
  scope: TenantScope,
  options: { includeRevoked?: boolean; limit?: number } = {},
  db: DbClient,
): Promise<ApiKeyDTO[]> {
  return db.apiKey.findMany({
    where: { tenantId: scope.tenantId, ...(options.includeRevoked ? {} : { revokedAt: null }) },
    select: apiKeySelect,
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: pageSize(options.limit, 100),
  });
}

export async function getApiKey(scope: TenantScope, apiKeyId: string, db: DbClient): Promise<ApiKeyDTO> {
  const key = await db.apiKey.findFirst({
    where: { tenantId: scope.tenantId, id: apiKeyId },
    select: apiKeySelect,
  });
  if (!key) throw notFound(apiKeyId);
  return key;
}

/**
 * The key a create with this `createKey` made, or the key stored under `keyHash` (a concurrent create with the
 * same idempotency key that has not recorded its columns yet), with whether its hash is `keyHash`.
 */
export async function findApiKeyByCreateKey(
  scope: TenantScope,
  lookup: { createKey: string; keyHash: string },
  db: DbClient,
): Promise<{ apiKey: ApiKeyDTO; createKey: string | null; hashMatches: boolean } | null> {
  const row = await db.apiKey.findFirst({
    where: {
      tenantId: scope.tenantId,
      OR: [{ createKey: lookup.createKey }, { key: lookup.keyHash }],
    },
    select: { ...apiKeySelect, key: true, createKey: true },
  });
  if (!row) return null;
  const { key, createKey, ...apiKey } = row;
  return { apiKey, createKey, hashMatches: key === lookup.keyHash };
}

/**
 * Records Berth's own columns on a key the API-key plugin just created (the plugin knows nothing
 * about roles or creators).
 */
export async function setApiKeyOwnership(
  scope: TenantScope,
  apiKeyId: string,
  data: {
    role: TenantRole;
    createdByUserId: string | null;
    mintedByApiKeyId?: string | null;
    /** `scopedCreateKey` of the request's idempotency key (unique per tenant). */
    createKey?: string | null;
  },
  db: DbClient,
): Promise<ApiKeyDTO> {
  const { count } = await db.apiKey.updateMany({ where: { tenantId: scope.tenantId, id: apiKeyId }, data });
  if (count === 0) throw notFound(apiKeyId);
  return getApiKey(scope, apiKeyId, db);
}

/**
 * Revokes a key and, in the same statement, every key it minted (transitively, `mintedByApiKeyId`): a key
 * minted by a key never outlives it unless it was minted `detached`. Revoked keys are disabled for the
 * plugin (verification fails with KEY_DISABLED) and stamped `revokedAt` for the dashboard; rows stay for the
 * audit trail. Revoking twice is a no-op. Returns the key and the ids of the minted keys revoked with it.
 */
export async function revokeApiKey(
  scope: TenantScope,
  apiKeyId: string,
  db: DbClient,
): Promise<ApiKeyDTO & { alsoRevoked: string[] }> {
  await getApiKey(scope, apiKeyId, db); // NOT_FOUND for another tenant's or an unknown key
  const rows = await db.$queryRaw<{ id: string }[]>`
    WITH RECURSIVE lineage AS (
      SELECT id FROM api_keys WHERE tenant_id = ${scope.tenantId} AND id = ${apiKeyId}
      UNION
      SELECT k.id FROM api_keys k JOIN lineage l ON k.minted_by_api_key_id = l.id
       WHERE k.tenant_id = ${scope.tenantId}
    )
    UPDATE api_keys SET enabled = false, revoked_at = now(), updated_at = now()
     WHERE id IN (SELECT id FROM lineage) AND revoked_at IS NULL
    RETURNING id`;
  const alsoRevoked = rows.map((row) => row.id).filter((id) => id !== apiKeyId);
  return { ...(await getApiKey(scope, apiKeyId, db)), alsoRevoked };
}

function notFound(apiKeyId: string): AppError {
  return new AppError("NOT_FOUND", `api key ${apiKeyId} not found`, { userMessage: "API key not found." });
}
