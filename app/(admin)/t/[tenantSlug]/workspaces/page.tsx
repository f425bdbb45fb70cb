import type { Metadata } from "next";
import { WorkspacesTable } from "./workspaces-table";

export const metadata: Metadata = { title: "Workspaces" };

export default async function WorkspacesPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <h1>Workspaces</h1>
      <p className="lead">
        Where agents work: each workspace&apos;s state, backend, leases and idle time. Open one for the events
        that explain why it is alive or stopped.
      </p>
      <WorkspacesTable tenantSlug={tenantSlug} />
    </>
  );
}
