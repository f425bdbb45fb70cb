import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { RoleGate } from "../_components/role-gate";
import { WebhooksManager } from "./webhooks-manager";

export const metadata: Metadata = { title: "Webhooks" };

export default async function Page({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <PageHeader
        title="Webhooks"
        description="HTTPS endpoints that receive this tenant’s workspace and turn events, signed with a per-endpoint secret and retried with backoff. Admins only."
      />
      <RoleGate tenantSlug={tenantSlug} needs="webhook:manage">
        <WebhooksManager tenantSlug={tenantSlug} />
      </RoleGate>
    </>
  );
}
