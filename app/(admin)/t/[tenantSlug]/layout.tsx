import { TRPCError } from "@trpc/server";
import { notFound, redirect } from "next/navigation";
import type { ReactNode } from "react";
import { getServerCaller } from "@/app/_trpc/server";
import { SignOutButton } from "./_components/sign-out-button";
import { TenantNav } from "./_components/tenant-nav";

export const dynamic = "force-dynamic";

/**
 * The tenant shell. Membership is checked here for the page chrome, and again by every tRPC call the
 * pages make (the tenant procedure), so a page can never show another tenant's data.
 */
export default async function TenantLayout({
  children,
  params,
}: {
  children: ReactNode;
  params: Promise<{ tenantSlug: string }>;
}) {
  const { tenantSlug } = await params;
  const caller = await getServerCaller();
  const me = await caller.tenant.me().catch((error: unknown) => {
    if (error instanceof TRPCError && error.code === "UNAUTHORIZED") return null;
    throw error;
  });
  if (!me) redirect(`/sign-in?next=${encodeURIComponent(`/t/${tenantSlug}`)}`);
  const tenant = me.tenants.find((t) => t.slug === tenantSlug);
  // Same answer for "does not exist" and "not yours": no probing for other tenants' slugs.
  if (!tenant) notFound();
  // host-unconfined: agent commands run on this machine with Berth's privileges. Say so on every page.
  const backend = await caller.workspace.backend({ tenantSlug }).catch(() => null);
  const who = me.principal.kind === "user" ? me.principal.email : "API key";

  return (
    <div className="shell">
      <aside className="sidebar">
        <div className="brand">Berth</div>
        <div className="tenant-name" data-testid="tenant-name">
          {tenant.name}
        </div>
        <TenantNav tenantSlug={tenant.slug} />
        <div className="sidebar-footer">
          <span>
            {who} · {tenant.role}
          </span>
          <SignOutButton />
        </div>
      </aside>
      <main className="main">
        {backend && !backend.isolated && (
          <div className="alert error" role="alert" data-testid="unconfined-backend-banner">
            Workspaces run unconfined ({backend.backend}): every agent command and MCP server runs on the host
            with Berth&apos;s privileges. Only trusted agents belong here; unset BERTH_WORKSPACE_BACKEND to
            confine them with bubblewrap.
          </div>
        )}
        {children}
      </main>
    </div>
  );
}
