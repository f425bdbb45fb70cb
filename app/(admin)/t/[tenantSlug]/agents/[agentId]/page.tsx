import type { Metadata } from "next";
import { AgentEditor } from "./agent-editor";

export const metadata: Metadata = { title: "Agent" };

export default async function AgentPage({
  params,
}: {
  params: Promise<{ tenantSlug: string; agentId: string }>;
}) {
  const { tenantSlug, agentId } = await params;
  return <AgentEditor tenantSlug={tenantSlug} agentId={agentId} />;
}
