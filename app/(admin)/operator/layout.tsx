import { TRPCError } from "@trpc/server";
import Link from "next/link";
import { notFound, redirect } from "next/navigation";
import type { ReactNode } from "react";
import { Brand } from "@/app/_components/brand";
import { Badge } from "@/app/_components/ui/badge";
import { ThemeToggle } from "@/app/_components/ui/theme";
import { getServerCaller } from "@/app/_trpc/server";
import { SignOutButton } from "../t/[tenantSlug]/_components/sign-out-button";
import { OperatorNav } from "./_components/operator-nav";

export const dynamic = "force-dynamic";

/**
 * The operator shell, above tenants. Only operators get it: anyone else (tenant admins and owners too) gets
 * the not-found page, so the pages do not even say they exist; every `operator.*` call checks again.
 */
export default async function OperatorLayout({ children }: { children: ReactNode }) {
  const caller = await getServerCaller();
  const me = await caller.tenant.me().catch((error: unknown) => {
    if (error instanceof TRPCError && error.code === "UNAUTHORIZED") return null;
    throw error;
  });
  if (!me) redirect(`/sign-in?next=${encodeURIComponent("/operator")}`);
  const isOperator = await caller.operator.me().then(
    () => true,
    (error: unknown) => {
      if (error instanceof TRPCError && error.code === "FORBIDDEN") return false;
      throw error;
    },
  );
  if (!isOperator) notFound();
  const who = me.principal.kind === "user" ? me.principal.email : "API key";
  const home = me.tenants[0];

  return (
    <div className="min-h-screen md:grid md:grid-cols-[15rem_1fr]">
      <aside className="bg-sidebar flex flex-col gap-5 border-r px-3 py-4 md:sticky md:top-0 md:h-screen">
        <div className="px-1.5">
          <Link href="/operator">
            <Brand />
          </Link>
          <Badge tone="outline" className="mt-3">
            Operator
          </Badge>
        </div>
        <OperatorNav />
        <div className="mt-auto flex flex-col gap-2 border-t pt-3">
          {home && (
            <Link
              href={`/t/${encodeURIComponent(home.slug)}`}
              className="text-muted-foreground text-xs hover:underline"
            >
              ← {home.name}
            </Link>
          )}
          <div className="flex items-center gap-2">
            <span className="min-w-0 flex-1 truncate text-xs font-medium" data-testid="operator-email">
              {who}
            </span>
            <ThemeToggle />
            <SignOutButton />
          </div>
        </div>
      </aside>
      <main className="mx-auto w-full max-w-6xl min-w-0 px-4 py-6 sm:px-6 md:px-8 md:py-8">{children}</main>
    </div>
  );
}
