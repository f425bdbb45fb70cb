import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { RoleGate } from "../_components/role-gate";
import { AuditTable } from "./audit-table";

export const metadata: Metadata = { title: "Audit" };

export default async function Page({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <PageHeader
        title="Audit log"
        description="Every change made in this tenant: who, what, when and whether it worked. Admins only."
      />
      <RoleGate tenantSlug={tenantSlug} needs="audit:read">
        <AuditTable tenantSlug={tenantSlug} />
      </RoleGate>
    </>
  );
}
