import { AppError } from "@/server/shared/errors";
import { isRoleAtLeast, type TenantRole } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";

/**
 * What each role may do in a tenant. Viewers read; members use agents and sessions; admins manage
 * agents, keys, members, workspaces and the library; owners also manage the tenant itself.
 */
export const TENANT_ACTIONS = {
  "tenant:read": "viewer",
  "member:read": "viewer",
  "agent:read": "viewer",
  "session:read": "viewer",
  "workspace:read": "viewer",
  "library:read": "viewer",
  "agent:use": "member",
  "session:use": "member",
  "agent:manage": "admin",
  "api-key:read": "admin",
  "api-key:manage": "admin",
  "member:manage": "admin",
  "workspace:manage": "admin",
  "library:manage": "admin",
  "audit:read": "admin",
  "operations:read": "admin",
  "webhook:manage": "admin",
  "tenant:manage": "owner",
} as const satisfies Record<string, TenantRole>;

export type TenantAction = keyof typeof TENANT_ACTIONS;

export function roleCan(role: TenantRole, action: TenantAction): boolean {
  return isRoleAtLeast(role, TENANT_ACTIONS[action]);
}

function can(scope: TenantScope, action: TenantAction): boolean {
  return roleCan(scope.role, action);
}

/** Throws AppError FORBIDDEN unless the scope's role allows the action. */
export function assertCan(scope: TenantScope, action: TenantAction): void {
  if (!can(scope, action)) {
    throw new AppError("FORBIDDEN", `role ${scope.role} may not ${action}`, {
      userMessage: "You do not have permission to do this.",
      details: { action, role: scope.role },
    });
  }
}

/**
 * Whether `actorRole` may grant `targetRole` (to a member or an API key): nobody grants more than
 * they hold, and only owners create owners.
 */
export function canGrantRole(actorRole: TenantRole, targetRole: TenantRole): boolean {
  return isRoleAtLeast(actorRole, "admin") && isRoleAtLeast(actorRole, targetRole);
}
