import Link from "next/link";
import { CopyButton } from "@/app/_components/ui/copy-button";

export function sessionDeleteConfirmText(session: { name: string; workspaceId: string }): string {
  return (
    `Its chat history is deleted, with the sessions of any team workers it led, and its MCP scopes and ` +
    `offloaded files are purged from workspace ${session.workspaceId}. The workspace itself stays. ` +
    `This cannot be undone.`
  );
}

/** A workspace id, shortened, linking to the workspace page, with a copy button for the whole id. */
export function WorkspaceLink({ tenantSlug, workspaceId }: { tenantSlug: string; workspaceId: string }) {
  return (
    <span className="inline-flex items-center gap-0.5">
      <Link
        className="font-mono text-xs hover:underline"
        title={workspaceId}
        href={`/t/${encodeURIComponent(tenantSlug)}/workspaces/${encodeURIComponent(workspaceId)}`}
        data-testid="workspace-link"
      >
        {workspaceId.length > 24 ? `${workspaceId.slice(0, 22)}…` : workspaceId}
      </Link>
      <CopyButton value={workspaceId} label="Copy workspace id" />
    </span>
  );
}
