import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { OperatorAudit } from "./operator-audit";

export const metadata: Metadata = { title: "Operator audit" };

export default function OperatorAuditPage() {
  return (
    <>
      <PageHeader
        title="Operator audit"
        description="Tenant creation, suspension, resumption and deletion, and operator grants. Each tenant's own audit log stays in the tenant."
      />
      <OperatorAudit />
    </>
  );
}
