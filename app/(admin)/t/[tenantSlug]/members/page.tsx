import type { Metadata } from "next";
import { MembersTable } from "./members-table";

export const metadata: Metadata = { title: "Members" };

export default async function MembersPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <h1>Members</h1>
      <p className="lead">People who can sign in to this tenant, and their roles.</p>
      <MembersTable tenantSlug={tenantSlug} />
    </>
  );
}
