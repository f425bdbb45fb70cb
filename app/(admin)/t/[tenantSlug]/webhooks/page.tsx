import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
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
      <WebhooksManager tenantSlug={tenantSlug} />
    </>
  );
}
