import type { Metadata } from "next";
import { AgentsManager } from "./agents-manager";

export const metadata: Metadata = { title: "Agents" };

export default async function AgentsPage({ params }: { params: Promise<{ tenantSlug: string }> }) {
  const { tenantSlug } = await params;
  return (
    <>
      <h1>Agents</h1>
      <p className="lead">
        Agent definitions: the model each one talks to and how its workspaces are isolated. Provider keys are
        write-only: this page can set, replace or clear a key, never show one.
      </p>
      <AgentsManager tenantSlug={tenantSlug} />
    </>
  );
}
