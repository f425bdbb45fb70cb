import type { ReactNode } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { getServerCaller } from "@/app/_trpc/server";
import { roleCan, TENANT_ACTIONS, type TenantAction } from "@/server/auth/policy";

/**
 * A page section only some roles may open (the sidebar hides its link from the others): a caller below the
 * role gets one sentence saying which role it takes, instead of a page of 403 errors. The API checks again.
 */
export async function RoleGate({
  tenantSlug,
  needs,
  children,
}: {
  tenantSlug: string;
  needs: TenantAction;
  children: ReactNode;
}) {
  // The layout already checked the membership: this only reads the role.
  const me = await (await getServerCaller()).tenant.me().catch(() => null);
  const role = me?.tenants.find((tenant) => tenant.slug === tenantSlug)?.role;
  if (role && roleCan(role, needs)) return children;
  return (
    <Alert tone="info" data-testid="role-required">
      This page needs the {TENANT_ACTIONS[needs]} role{role ? `; you are a ${role} of this tenant` : ""}. Ask
      one of its admins if you need it.
    </Alert>
  );
}
