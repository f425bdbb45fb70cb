import type { Metadata } from "next";
import { PageHeader } from "@/app/_components/ui/page-header";
import { AgentsManager } from "./agents-manager";

export const metadata: Metadata = { title: "Agents" };

export default async function AgentsPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <PageHeader
        title="Agents"
        description="The model each agent talks to and how its workspaces are isolated. Provider keys are write-only."
      />
      <AgentsManager tenantSlug={tenantSlug} />
    </>
  );
}
