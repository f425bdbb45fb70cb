import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { CreateTenantDialog } from "./create-tenant-dialog";
import { TenantsTable } from "./tenants-table";

export const metadata: Metadata = { title: "Tenants" };

export default function OperatorTenantsPage() {
  return (
    <>
      <PageHeader
        title="Tenants"
        description="Every tenant of this installation, with its usage. Suspend, resume or delete one from its page."
        actions={<CreateTenantDialog />}
      />
      <TenantsTable />
    </>
  );
}
