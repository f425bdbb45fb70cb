import { TRPCError } from "@trpc/server";
import Link from "next/link";
import { notFound, redirect } from "next/navigation";
import type { ReactNode } from "react";
import { Brand } from "@/app/_components/brand";
import { Alert } from "@/app/_components/ui/alert";
import { Badge } from "@/app/_components/ui/badge";
import { ThemeToggle } from "@/app/_components/ui/theme";
import { getServerCaller } from "@/app/_trpc/server";
import { SignOutButton } from "./_components/sign-out-button";
import { MobileNav, TenantNav } from "./_components/tenant-nav";

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
  // Suspended by an operator: every tenant call is refused, so say why instead of failing each page.
  if (tenant.status !== "active") {
    return (
      <div className="mx-auto flex min-h-screen max-w-lg flex-col justify-center gap-4 px-4">
        <Brand />
        <h1 className="text-xl" data-testid="tenant-suspended">
          {tenant.name} is {tenant.status === "suspended" ? "suspended" : "being deleted"}
        </h1>
        <Alert>
          {tenant.status === "suspended"
            ? "The operator of this installation suspended this tenant: its workspaces are stopped and its API keys refused. Nothing was deleted; ask the operator to resume it."
            : "The operator of this installation is deleting this tenant."}
        </Alert>
        <div>
          <SignOutButton />
        </div>
      </div>
    );
  }
  // host-unconfined: agent commands run on this machine with Berth's privileges. Say so on every page.
  const backend = await caller.workspace.backend({ tenantSlug }).catch(() => null);
  // Operators (above tenants) get a link to the operator pages; nobody else learns they exist.
  const isOperator = await caller.operator.me().then(
    () => true,
    () => false,
  );
  const who = me.principal.kind === "user" ? me.principal.email : "API key";
  const base = `/t/${encodeURIComponent(tenant.slug)}`;

  const account = (
    <div className="flex items-center gap-2">
      <Link
        href={`${base}/profile`}
        className="hover:bg-accent flex min-w-0 flex-1 items-center gap-2 rounded-md p-1.5"
        data-testid="account-link"
      >
        <span className="bg-muted flex size-7 shrink-0 items-center justify-center rounded-full text-xs font-semibold uppercase">
          {who.slice(0, 1)}
        </span>
        <span className="min-w-0">
          <span className="block truncate text-xs font-medium">{who}</span>
          <span className="text-muted-foreground block text-[11px]" data-testid="tenant-role">
            {tenant.role}
          </span>
        </span>
      </Link>
      <ThemeToggle />
      <SignOutButton />
    </div>
  );

  return (
    <div className="min-h-screen md:grid md:grid-cols-[15rem_1fr]">
      <aside className="bg-sidebar sticky top-0 hidden h-screen flex-col gap-5 border-r px-3 py-4 md:flex">
        <div className="px-1.5">
          <Link href={base}>
            <Brand />
          </Link>
          <div className="mt-3 flex items-center gap-2 rounded-md border px-2 py-1.5">
            <span className="bg-foreground text-background flex size-5 items-center justify-center rounded text-[10px] font-bold uppercase">
              {tenant.name.slice(0, 1)}
            </span>
            <span className="truncate text-xs font-medium" data-testid="tenant-name">
              {tenant.name}
            </span>
          </div>
        </div>
        <TenantNav tenantSlug={tenant.slug} role={tenant.role} />
        {isOperator && (
          <Link
            href="/operator"
            className="text-muted-foreground hover:text-foreground px-2.5 text-sm font-medium"
            data-testid="operator-link"
          >
            Operator: all tenants →
          </Link>
        )}
        <div className="mt-auto border-t pt-3">{account}</div>
      </aside>
      <div className="flex min-w-0 flex-col">
        <header className="bg-background/80 sticky top-0 z-30 flex h-14 items-center gap-2 border-b px-3 backdrop-blur md:hidden">
          <MobileNav tenantSlug={tenant.slug} tenantName={tenant.name} role={tenant.role} />
          <Brand />
          <Badge tone="outline" className="ml-1 truncate">
            {tenant.name}
          </Badge>
          <div className="ml-auto flex items-center">
            <ThemeToggle />
            <SignOutButton />
          </div>
        </header>
        <main className="mx-auto w-full max-w-6xl min-w-0 px-4 py-6 sm:px-6 md:px-8 md:py-8">
          {backend && !backend.isolated && (
            <Alert className="mb-6" data-testid="unconfined-backend-banner">
              Workspaces run unconfined ({backend.backend}): every agent command and MCP server runs on the
              host with Berth&apos;s privileges. Only trusted agents belong here; unset
              BERTH_WORKSPACE_BACKEND to confine them with bubblewrap.
            </Alert>
          )}
          {children}
        </main>
      </div>
    </div>
  );
}
