import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { RoleGate } from "../_components/role-gate";
import { ApiKeysManager } from "./api-keys-manager";

export const metadata: Metadata = { title: "API keys" };

export default async function ApiKeysPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <PageHeader
        title="API keys"
        description={
          <>
            Keys for typed clients (<code>createBerthClient</code>) and scripts. A key acts in this tenant
            with its role, never more than its creator&apos;s.
          </>
        }
      />
      <RoleGate tenantSlug={tenantSlug} needs="api-key:read">
        <ApiKeysManager tenantSlug={tenantSlug} />
      </RoleGate>
    </>
  );
}
