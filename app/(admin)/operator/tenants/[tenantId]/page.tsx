import type { Metadata } from "next";
import { TenantDetail } from "./tenant-detail";

export const metadata: Metadata = { title: "Tenant" };

export default async function OperatorTenantPage({ params }: { params: Promise<{ tenantId: string }> }) {
  const { tenantId } = await params;
  return <TenantDetail tenantId={tenantId} />;
}
