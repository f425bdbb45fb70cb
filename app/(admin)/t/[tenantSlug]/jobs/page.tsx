import type { Metadata } from "next";
import { JobsTable } from "./jobs-table";

export const metadata: Metadata = { title: "Jobs" };

export default async function JobsPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <h1>Jobs</h1>
      <p className="lead">
        This tenant&apos;s background jobs (provisioning, stops, purges) and why failed ones failed. Admins
        only; a failed job can be retried.
      </p>
      <JobsTable tenantSlug={tenantSlug} />
    </>
  );
}
