"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/app/_trpc/client";
import { roleCan, type TenantAction } from "@/server/auth/policy";

/**
 * The signed-in user's role in this tenant (undefined while loading) and whether it allows `action`.
 * Only decides what the page offers: the API checks every call again. `whileLoading` is the answer
 * before the role is known.
 */
export function useTenantRole(tenantSlug: string) {
  const trpc = useTRPC();
  const me = useQuery(trpc.tenant.me.queryOptions());
  const role = me.data?.tenants.find((tenant) => tenant.slug === tenantSlug)?.role;
  const can = (action: TenantAction, whileLoading: boolean) => (role ? roleCan(role, action) : whileLoading);
  return { role, can };
}
