import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { WorkspacesTable } from "./workspaces-table";

export const metadata: Metadata = { title: "Workspaces" };

export default async function Page({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <PageHeader
        title="Workspaces"
        description="Where agents work: each workspace’s state, backend, leases and idle time. Open one for the events that explain why it is alive or stopped."
      />
      <WorkspacesTable tenantSlug={tenantSlug} />
    </>
  );
}
