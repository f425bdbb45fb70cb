import type { Metadata } from "next";
import Link from "next/link";
import { WorkspaceDetail } from "./workspace-detail";

export const metadata: Metadata = { title: "Workspace" };

export default async function WorkspacePage({
  params,
}: {
  params: Promise<{ tenantSlug: string; workspaceId: string }>;
}) {
  const { tenantSlug, workspaceId: rawId } = await params;
  const workspaceId = decodeURIComponent(rawId);
  return (
    <>
      <p className="muted" style={{ margin: "0 0 8px" }}>
        <Link href={`/t/${encodeURIComponent(tenantSlug)}/workspaces`}>← Workspaces</Link>
      </p>
      <h1 className="mono">{workspaceId}</h1>
      <p className="lead">
        Its state and why it is in it, its files and skills, the leases that keep it alive and the ledger of
        what happened to it.
      </p>
      <WorkspaceDetail tenantSlug={tenantSlug} workspaceId={workspaceId} />
    </>
  );
}
