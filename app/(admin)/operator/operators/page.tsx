import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { OperatorsPanel } from "./operators-panel";

export const metadata: Metadata = { title: "Operators" };

export default function OperatorsPage() {
  return (
    <>
      <PageHeader
        title="Operators"
        description="People who run this installation's tenants. Grant the role to an existing account; the last operator cannot be revoked."
      />
      <OperatorsPanel />
    </>
  );
}
