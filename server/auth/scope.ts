import type { TenantRole } from "@/server/auth/roles";

/**
 * The proven tenant context every data and service function takes first. It can only be created
 * by `mintTenantScope`, which only auth gates call (server/auth/resolve.ts, the tRPC tenant
 * middleware, the worker job loader): holding a TenantScope means "this caller was checked
 * against the database and belongs to this tenant with this role".
 */
declare const tenantScopeBrand: unique symbol;

export type TenantScope = {
  readonly tenantId: string;
  /** The signed-in user, or the user who created the API key; null for system scopes. */
  readonly userId: string | null;
  /** Set when the caller authenticated with an API key. */
  readonly apiKeyId: string | null;
  readonly role: TenantRole;
  readonly [tenantScopeBrand]: true;
};

/** Who did something, as recorded in audit logs and workspace events. */
export type ScopeActor =
  { type: "user"; id: string } | { type: "api_key"; id: string } | { type: "system"; id: string | null };

/**
 * Mints a scope. Call it ONLY from an auth gate after checking membership (or the API key's
 * tenant) in the database; everywhere else, receive a scope as a parameter.
 */
export function mintTenantScope(proof: {
  tenantId: string;
  userId: string | null;
  apiKeyId: string | null;
  role: TenantRole;
}): TenantScope {
  return Object.freeze({ ...proof }) as TenantScope;
}

/** The actor behind a scope: the API key when one was used, else the user, else the system. */
export function actorOfScope(scope: TenantScope): ScopeActor {
  if (scope.apiKeyId) return { type: "api_key", id: scope.apiKeyId };
  if (scope.userId) return { type: "user", id: scope.userId };
  return { type: "system", id: null };
}

/** "user:<id>", "api_key:<id>" or "system" — the compact actor string of workspace events. */
export function actorLabel(scope: TenantScope): string {
  const actor = actorOfScope(scope);
  return actor.id ? `${actor.type}:${actor.id}` : actor.type;
}
