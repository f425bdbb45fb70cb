import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { RoleGate } from "../_components/role-gate";
import { ReadinessView } from "./readiness-view";

export const metadata: Metadata = { title: "Readiness" };

export default async function Page({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <PageHeader
        title="Readiness"
        description="How long each stage of bringing a workspace up takes (queued, machine, gateway, attach, first answer), by backend and path, and the slowest recent provisions. Admins only."
      />
      <RoleGate tenantSlug={tenantSlug} needs="operations:read">
        <ReadinessView tenantSlug={tenantSlug} />
      </RoleGate>
    </>
  );
}
