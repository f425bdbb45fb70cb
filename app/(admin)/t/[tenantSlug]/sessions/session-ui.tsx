import Link from "next/link";

export function sessionDeleteConfirmText(session: { name: string; workspaceId: string }): string {
  return (
    `Delete session "${session.name || "unnamed"}"?\n\nIts chat history is deleted, with the sessions of ` +
    `any team workers it led, and its MCP scopes and offloaded files are purged from workspace ` +
    `${session.workspaceId}. The workspace itself stays. This cannot be undone.`
  );
}

export function WorkspaceLink({ tenantSlug, workspaceId }: { tenantSlug: string; workspaceId: string }) {
  return (
    <Link
      className="mono"
      href={`/t/${encodeURIComponent(tenantSlug)}/workspaces/${encodeURIComponent(workspaceId)}`}
      data-testid="workspace-link"
    >
      {workspaceId}
    </Link>
  );
}

export const formatDate = (value: Date | null) => (value ? value.toLocaleString() : "—");
