import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { RoleGate } from "../_components/role-gate";
import { JobsTable } from "./jobs-table";

export const metadata: Metadata = { title: "Jobs" };

export default async function Page({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <PageHeader
        title="Jobs"
        description="This tenant’s background jobs (provisioning, stops, purges) and why failed ones failed. Admins only; a failed job can be retried."
      />
      <RoleGate tenantSlug={tenantSlug} needs="operations:read">
        <JobsTable tenantSlug={tenantSlug} />
      </RoleGate>
    </>
  );
}
