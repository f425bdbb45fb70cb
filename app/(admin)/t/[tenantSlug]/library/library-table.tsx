"use client";

import { useInfiniteQuery, useMutation, useQueryClient } from "@tanstack/react-query";
import { BookMarked, Trash2 } from "lucide-react";
import Link from "next/link";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Badge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { Card, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { useTRPC } from "@/app/_trpc/client";
import type { LibraryEntryView } from "@/server/modules/library/library.types";
import { LoadMore } from "../_components/load-more";
import { mcpSummary } from "../_components/mcp-declaration-dialog";
import { useTenantRole } from "../_components/tenant-role";
import { EquipDialog, InstallDialog } from "./library-entry-actions";

const PAGE_SIZE = 100;

function bytes(size: number): string {
  return size < 1024 ? `${size} B` : `${(size / 1024).toFixed(1)} KiB`;
}

/** What an entry is, in a line: the command or URL of an MCP server, the files of a skill. */
function detailOf(entry: LibraryEntryView): string {
  if (entry.declaration) {
    const type = entry.declaration.mcp_config.type === "stdio_mcp" ? "stdio" : "HTTP";
    return `${type} · ${mcpSummary(entry.declaration)}`;
  }
  if (entry.skill) {
    const total =
      entry.skill.instructionsBytes + entry.skill.files.reduce((sum, file) => sum + file.bytes, 0);
    return `SKILL.md + ${entry.skill.files.length} file${entry.skill.files.length === 1 ? "" : "s"} · ${bytes(total)}`;
  }
  return "";
}

/**
 * The library: every entry with what it is, which agents' defaults name it (and whether their copy is the
 * library's), and, by role, equip (admins), install into a workspace (members and up) and delete (admins).
 */
export function LibraryTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const { can } = useTenantRole(tenantSlug);
  const canManage = can("library:manage", false);
  const canInstall = can("session:use", false);
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const entries = useInfiniteQuery(
    trpc.library.list.infiniteQueryOptions(
      { tenantSlug, limit: PAGE_SIZE },
      { getNextPageParam: (page) => page.nextCursor ?? undefined },
    ),
  );
  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.library.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.agent.pathKey() }),
    ]);
  const remove = useMutation(
    trpc.library.delete.mutationOptions({
      onSuccess: async () => {
        toast.success("Removed from the library.");
        await refresh();
      },
      onError: (error) => toast.error(error.message),
    }),
  );

  const columns: ColumnDef<LibraryEntryView, unknown>[] = [
    {
      id: "name",
      header: "Name",
      accessorFn: (entry) => `${entry.name} ${entry.description}`,
      cell: ({ row: { original: entry } }) => (
        <div className="min-w-44">
          <div className="flex items-center gap-2">
            <Badge tone={entry.kind === "MCP" ? "info" : "neutral"}>
              {entry.kind === "MCP" ? "MCP" : "skill"}
            </Badge>
            <span className="font-mono text-sm font-medium">{entry.name}</span>
          </div>
          {entry.description && (
            <div className="text-muted-foreground line-clamp-2 max-w-sm text-xs">{entry.description}</div>
          )}
        </div>
      ),
    },
    {
      id: "detail",
      header: "What",
      accessorFn: detailOf,
      cell: ({ getValue }) => (
        <span className="text-muted-foreground line-clamp-2 max-w-xs font-mono text-xs break-all">
          {String(getValue())}
        </span>
      ),
    },
    {
      id: "usedBy",
      header: "Used by",
      accessorFn: (entry) => entry.usedBy.map((use) => use.agentName).join(" "),
      cell: ({ row: { original: entry } }) =>
        entry.usedBy.length === 0 ? (
          <span className="text-muted-foreground text-xs">no agent</span>
        ) : (
          <ul className="flex flex-wrap gap-1.5" data-testid="used-by">
            {entry.usedBy.map((use) => (
              <li key={use.agentId} className="flex items-center gap-1">
                <Link
                  href={`${base}/agents/${encodeURIComponent(use.agentId)}`}
                  className="text-sm hover:underline"
                >
                  {use.agentName}
                </Link>
                {!use.identical && (
                  <Badge tone="warning" title="The agent's default has this name but other content">
                    differs
                  </Badge>
                )}
              </li>
            ))}
          </ul>
        ),
    },
    {
      id: "added",
      header: "Added",
      accessorFn: (entry) => entry.createdAt.getTime(),
      cell: ({ row: { original: entry } }) => <RelativeTime value={entry.createdAt} />,
    },
    {
      id: "actions",
      header: () => <span className="sr-only">Actions</span>,
      enableSorting: false,
      cell: ({ row: { original: entry } }) => (
        <div className="flex justify-end gap-1">
          {canManage && <EquipDialog tenantSlug={tenantSlug} entry={entry} onDone={refresh} />}
          {canInstall && <InstallDialog tenantSlug={tenantSlug} entry={entry} />}
          {canManage && (
            <ConfirmDialog
              title={`Remove ${entry.name} from the library?`}
              description={
                entry.usedBy.length > 0
                  ? `${entry.usedBy.map((use) => use.agentName).join(", ")} keep their copy in their defaults: removing the entry does not change an agent.`
                  : "No agent uses it. This cannot be undone."
              }
              confirmLabel="Remove"
              onConfirm={() => remove.mutateAsync({ tenantSlug, entryId: entry.id }).catch(() => {})}
              trigger={
                <Button
                  variant="ghost"
                  size="sm"
                  aria-label={`Remove ${entry.name}`}
                  disabled={remove.isPending}
                >
                  <Trash2 className="text-destructive" />
                </Button>
              }
            />
          )}
        </div>
      ),
    },
  ];

  const items = entries.data?.pages.flatMap((page) => page.items) ?? [];
  return (
    <Card aria-labelledby="library-heading">
      <CardHeader>
        <CardTitle id="library-heading">Entries</CardTitle>
      </CardHeader>
      {entries.error ? (
        <div className="px-5 pb-5">
          <Alert>{entries.error.message}</Alert>
        </div>
      ) : (
        <DataTable
          label="Library"
          columns={columns}
          data={items}
          loading={!entries.data}
          rowTestId="library-row"
          filterPlaceholder="Filter the library…"
          empty={
            <EmptyState
              icon={BookMarked}
              title="The library is empty"
              description={
                canManage
                  ? "Add an MCP server or upload a skill: agents' defaults and workspaces can then be equipped from it."
                  : "Admins add MCP servers and skills here."
              }
            />
          }
        />
      )}
      <LoadMore query={entries} />
    </Card>
  );
}
