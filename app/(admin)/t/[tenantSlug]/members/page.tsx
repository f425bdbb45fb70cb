import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { MembersHeaderActions, MembersTable } from "./members-table";

export const metadata: Metadata = { title: "Members" };

export default async function MembersPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <PageHeader
        title="Members"
        description="People who can sign in to this tenant, and their roles."
        actions={<MembersHeaderActions tenantSlug={tenantSlug} />}
      />
      <MembersTable tenantSlug={tenantSlug} />
    </>
  );
}
