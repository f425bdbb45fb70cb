import type { Metadata } from "next";
import Link from "next/link";
import { AgentEditor } from "./agent-editor";

export const metadata: Metadata = { title: "Agent" };

export default async function AgentPage({
  params,
}: {
  params: Promise<{ tenantSlug: string; agentId: string }>;
}) {
  const { tenantSlug, agentId } = await params;
  return (
    <>
      <p className="muted">
        <Link href={`/t/${encodeURIComponent(tenantSlug)}/agents`}>← Agents</Link>
      </p>
      <AgentEditor tenantSlug={tenantSlug} agentId={agentId} />
    </>
  );
}
