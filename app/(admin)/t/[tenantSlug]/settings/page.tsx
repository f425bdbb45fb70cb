import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { SettingsView } from "./settings-view";

export const metadata: Metadata = { title: "Settings" };

export default async function SettingsPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <PageHeader
        title="Settings"
        description="This tenant's defaults for its agents and workspaces, next to what the operator's installation allows."
      />
      <SettingsView tenantSlug={tenantSlug} />
    </>
  );
}
