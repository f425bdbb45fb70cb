import { TRPCError } from "@trpc/server";
import { redirect } from "next/navigation";
import { AuthCard } from "@/app/_components/auth-card";
import { getServerCaller } from "@/app/_trpc/server";

export const dynamic = "force-dynamic";

/** Entry point: signed-in users land on their first tenant, everyone else on the sign-in page. */
export default async function HomePage() {
  const caller = await getServerCaller();
  const me = await caller.tenant.me().catch((error: unknown) => {
    if (error instanceof TRPCError && error.code === "UNAUTHORIZED") return null;
    throw error;
  });
  if (!me) redirect("/sign-in");
  const first = me.tenants[0];
  if (first) redirect(`/t/${encodeURIComponent(first.slug)}`);
  // An operator without a tenant of their own runs the installation's tenants.
  if (
    await caller.operator.me().then(
      () => true,
      () => false,
    )
  )
    redirect("/operator");
  return (
    <AuthCard
      title="No tenant yet"
      description="Your account is not a member of any tenant. Ask a tenant admin for an invitation link."
    />
  );
}
