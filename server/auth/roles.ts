import { z } from "zod";

/** Tenant roles, most privileged first. Mirrors the `MembershipRole` enum in prisma/tenant.prisma. */
export const TENANT_ROLES = ["owner", "admin", "member", "viewer"] as const;
export const ZTenantRole = z.enum(TENANT_ROLES);
export type TenantRole = z.infer<typeof ZTenantRole>;

const RANK: Record<TenantRole, number> = { owner: 3, admin: 2, member: 1, viewer: 0 };

/** True when `role` has at least the privileges of `minimum`. */
export function isRoleAtLeast(role: TenantRole, minimum: TenantRole): boolean {
  return RANK[role] >= RANK[minimum];
}
