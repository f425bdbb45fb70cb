import type { Db } from "@/server/db";
import { createHash } from "node:crypto";
import { AppError } from "@/server/shared/errors";
import type { BerthAuth } from "@/server/auth/auth";
import {
  findApiKeyByHashForGate,
  findApiKeyForGate,
  findApiKeyTenantForGate,
  findMembershipForGate,
  findTenantForGate,
  touchApiKeyForGate,
  type GateApiKey,
} from "@/server/auth/gate.data";
import { isRoleAtLeast, type TenantRole } from "@/server/auth/roles";
import { mintTenantScope, type TenantScope } from "@/server/auth/scope";
import { assertTenantAdmits } from "@/server/auth/tenant-suspension";

/** Who is calling, before any tenant is chosen. */
export type RequestPrincipal =
  | { kind: "user"; userId: string; email: string; name: string; authSessionId: string }
  | { kind: "api_key"; apiKeyId: string; tenantId: string; role: TenantRole; userId: string | null };

// lastUsedAt is a "recently used" signal for admins, not an access log (the audit log is): recording it
// at most once a minute keeps a write off every authenticated request.
const LAST_USED_GRANULARITY_MS = 60_000;

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * Authenticates a request: an `Authorization: Bearer <api key>` header wins; otherwise the
 * better-auth session cookie. Returns null when neither is present. A Bearer header with a bad,
 * revoked or expired key throws UNAUTHORIZED instead of silently falling back to the cookie.
 * Verifying a key records its last use.
 */
export async function resolveRequestPrincipal(
  auth: BerthAuth,
  headers: Headers,
  db: Db,
): Promise<RequestPrincipal | null> {
  const authorization = headers.get("authorization");
  const bearer = authorization ? BEARER.exec(authorization)?.[1] : undefined;
  if (authorization && !bearer) throw unauthorized("malformed Authorization header");
  if (bearer) return resolveApiKeyPrincipal(bearer, db);

  const session = await auth.api.getSession({ headers });
  if (!session) return null;
  return {
    kind: "user",
    userId: session.user.id,
    email: session.user.email,
    name: session.user.name,
    authSessionId: session.session.id,
  };
}

/**
 * Verifies a Bearer key in one query: the hash better-auth's api-key plugin stores (SHA-256, base64url),
 * enabled, not revoked, not expired (refused, but kept for the audit trail, where the plugin would delete
 * it). The plugin's own verify is not used on this path: it costs three statements per request (lookup and
 * two writes) for features Berth keeps off (rate limits, usage counts, permissions).
 */
async function resolveApiKeyPrincipal(key: string, db: Db): Promise<RequestPrincipal> {
  const gate = await authenticateApiKey(key, db);
  if (!gate) throw unauthorized("api key unknown, revoked, disabled or expired");
  return {
    kind: "api_key",
    apiKeyId: gate.id,
    tenantId: gate.tenantId,
    role: gate.role,
    userId: gate.createdByUserId,
  };
}

/** The usable key behind a plain key (recording its use, at most once a minute), or null. */
export async function authenticateApiKey(plainKey: string, db: Db): Promise<GateApiKey | null> {
  const gate = await findApiKeyByHashForGate(hashApiKey(plainKey), db);
  if (!gate?.usable) return null;
  const now = new Date();
  if (!gate.lastUsedAt || now.getTime() - gate.lastUsedAt.getTime() >= LAST_USED_GRANULARITY_MS) {
    await touchApiKeyForGate(gate.id, now, LAST_USED_GRANULARITY_MS, db);
  }
  return gate;
}

/** The key hash better-auth's api-key plugin stores (its defaultKeyHasher: SHA-256, base64url, no padding). */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key).digest("base64url");
}

/**
 * Checks the principal against the tenant (id or slug) in the database and mints its scope.
 * Users need a membership; API keys must belong to the tenant, and act with the lower of the key's
 * role and its creator's current role (a key stops working when its creator leaves the tenant).
 * Throws AppError FORBIDDEN otherwise, and for a tenant an operator suspended (`details.reason:
 * "tenant_suspended"`). It always reads the database, so calling it again before a mutation is the
 * "re-check membership" step.
 */
export async function resolveTenantScope(
  principal: RequestPrincipal,
  tenantIdOrSlug: string,
  db: Db,
): Promise<TenantScope> {
  if (principal.kind === "user") {
    const membership = await findMembershipForGate(tenantIdOrSlug, principal.userId, db);
    if (!membership) throw forbidden(`user ${principal.userId} is not a member of ${tenantIdOrSlug}`);
    assertTenantAdmits(membership.tenantId, membership.tenantStatus);
    return mintTenantScope({
      tenantId: membership.tenantId,
      userId: principal.userId,
      apiKeyId: null,
      role: membership.role,
    });
  }

  const key = await findApiKeyTenantForGate(principal.apiKeyId, tenantIdOrSlug, db);
  if (!key?.usable || !key.tenantMatches) {
    throw forbidden(`api key ${principal.apiKeyId} does not belong to ${tenantIdOrSlug}`);
  }
  assertTenantAdmits(key.tenantId, key.tenantStatus);
  return scopeForKey(
    { apiKeyId: key.id, tenantId: key.tenantId, role: key.role, userId: key.createdByUserId },
    key.creatorRole,
  );
}

/** A key acts with the lower of its role and its creator's current role; a departed creator's keys stop. */
function scopeForKey(
  key: { apiKeyId: string; tenantId: string; role: TenantRole; userId: string | null },
  creatorRole: TenantRole | null,
): TenantScope {
  let role = key.role;
  if (key.userId) {
    if (!creatorRole) throw forbidden(`the creator of api key ${key.apiKeyId} is no longer a member`);
    if (!isRoleAtLeast(creatorRole, role)) role = creatorRole;
  }
  return mintTenantScope({ tenantId: key.tenantId, userId: key.userId, apiKeyId: key.apiKeyId, role });
}

/** Re-reads membership (or the key) for an existing scope; for mutations. Throws FORBIDDEN when gone. */
export async function reverifyTenantScope(scope: TenantScope, db: Db): Promise<TenantScope> {
  if (scope.apiKeyId) {
    const key = await findApiKeyForGate(scope.apiKeyId, db);
    if (!key) throw forbidden(`api key ${scope.apiKeyId} no longer exists`);
    return resolveTenantScope(
      {
        kind: "api_key",
        apiKeyId: key.id,
        tenantId: key.tenantId,
        role: key.role,
        userId: key.createdByUserId,
      },
      scope.tenantId,
      db,
    );
  }
  if (scope.userId) {
    const membership = await findMembershipForGate(scope.tenantId, scope.userId, db);
    if (!membership) throw forbidden(`user ${scope.userId} is no longer a member of ${scope.tenantId}`);
    assertTenantAdmits(membership.tenantId, membership.tenantStatus);
    return mintTenantScope({
      tenantId: scope.tenantId,
      userId: scope.userId,
      apiKeyId: null,
      role: membership.role,
    });
  }
  return resolveSystemTenantScope(scope.tenantId, {}, db);
}

/**
 * A scope for Berth's own background work (queue jobs, reapers) acting on a tenant. The tenant id
 * comes from a job payload, so it is re-checked against the database rather than trusted. A suspended
 * (or deleting) tenant is refused unless the caller is work suspension and deletion themselves need:
 * stopping and purging workspaces, the sweep and reconcile, recording audit rows (`allowSuspended`).
 */
export async function resolveSystemTenantScope(
  tenantId: string,
  options: { allowSuspended?: boolean } = {},
  db: Db,
): Promise<TenantScope> {
  const found = await findTenantForGate(tenantId, db);
  if (found?.id !== tenantId)
    throw new AppError("NOT_FOUND", `tenant ${tenantId} not found`, { userMessage: "Tenant not found." });
  if (!options.allowSuspended) assertTenantAdmits(tenantId, found.status);
  return mintTenantScope({ tenantId, userId: null, apiKeyId: null, role: "owner" });
}

/** True while the tenant exists and is active (not suspended or being deleted): for work already under way. */
export async function tenantAdmitsWork(tenantId: string, db: Db): Promise<boolean> {
  return (await findTenantForGate(tenantId, db))?.status === "active";
}

function forbidden(message: string): AppError {
  return new AppError("FORBIDDEN", message, { userMessage: "You do not have access to this tenant." });
}

function unauthorized(message: string): AppError {
  return new AppError("UNAUTHORIZED", message, { userMessage: "Sign in or provide a valid API key." });
}
