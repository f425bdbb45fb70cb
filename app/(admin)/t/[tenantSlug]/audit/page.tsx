import type { Metadata } from "next";
import { AuditTable } from "./audit-table";

export const metadata: Metadata = { title: "Audit" };

export default async function AuditPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <h1>Audit log</h1>
      <p className="lead">
        Every change made in this tenant: who, what, when and whether it worked. Admins only.
      </p>
      <AuditTable tenantSlug={tenantSlug} />
    </>
  );
}
