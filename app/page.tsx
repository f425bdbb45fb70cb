import { TRPCError } from "@trpc/server";
import { redirect } from "next/navigation";
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
  return (
    <main className="auth-page">
      <div className="auth-card">
        <div className="brand">Berth</div>
        <h1>No tenant yet</h1>
        <p className="lead">Your account is not a member of any tenant. Ask a tenant admin to add you.</p>
      </div>
    </main>
  );
}
