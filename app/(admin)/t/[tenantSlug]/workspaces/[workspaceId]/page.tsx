import type { Metadata } from "next";
import Link from "next/link";
import { Suspense } from "react";
import { CopyButton } from "@/app/_components/ui/copy-button";
import { PageHeader } from "@/app/_components/ui/page-header";
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
      <PageHeader
        breadcrumb={
          <Link className="hover:underline" href={`/t/${encodeURIComponent(tenantSlug)}/workspaces`}>
            ← Workspaces
          </Link>
        }
        title={
          <span className="inline-flex items-center gap-1">
            <span className="font-mono text-xl">{workspaceId}</span>
            <CopyButton value={workspaceId} label="Copy workspace id" />
          </span>
        }
        description="Its state and why, its files, skills and MCP servers, the leases that keep it alive and the ledger of what happened to it."
      />
      {/* The tab lives in the URL (useSearchParams), read on the client. */}
      <Suspense>
        <WorkspaceDetail tenantSlug={tenantSlug} workspaceId={workspaceId} />
      </Suspense>
    </>
  );
}
