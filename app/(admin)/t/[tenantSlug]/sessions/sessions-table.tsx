"use client";

import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { MessagesSquare, Trash2 } from "lucide-react";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { StateBadge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { Card } from "@/app/_components/ui/card";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Select } from "@/app/_components/ui/select";
import { useTRPC } from "@/app/_trpc/client";
import type { SessionDTO } from "@/server/modules/session/session.types";
import { sessionDeleteConfirmText, WorkspaceLink } from "./session-ui";
import { NewSessionButton } from "./new-session";
import { LoadMore } from "../_components/load-more";
import { LiveBadge, useLiveChanges } from "../_components/live-changes";
import { useTenantRole } from "../_components/tenant-role";

const PAGE_SIZE = 50;
// The filter and the agent names come from one page of agents: the list's maximum page.
const AGENT_LOOKUP_LIMIT = 200;

export function SessionsTable({ tenantSlug, agentId }: { tenantSlug: string; agentId: string | null }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const router = useRouter();
  const { can } = useTenantRole(tenantSlug);
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const agents = useQuery(trpc.agent.list.queryOptions({ tenantSlug, limit: AGENT_LOOKUP_LIMIT }));
  const live = useLiveChanges(tenantSlug, ["session"], [trpc.session.list.pathFilter()]);
  const sessions = useInfiniteQuery(
    trpc.session.list.infiniteQueryOptions(
      { tenantSlug, limit: PAGE_SIZE, ...(agentId ? { agentId } : {}) },
      { getNextPageParam: (page) => page.nextCursor ?? undefined },
    ),
  );
  const remove = useMutation(
    trpc.session.delete.mutationOptions({
      onSuccess: async () => {
        toast.success("Session deleted.");
        await Promise.all([
          queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() }),
          queryClient.invalidateQueries({ queryKey: trpc.tenant.overview.queryKey({ tenantSlug }) }),
        ]);
      },
    }),
  );

  const agentNames = new Map(agents.data?.items.map((agent) => [agent.id, agent.name]));
  const items = sessions.data?.pages.flatMap((page) => page.items) ?? [];

  const columns: ColumnDef<SessionDTO, unknown>[] = [
    {
      id: "session",
      header: "Session",
      accessorFn: (session) => session.name,
      cell: ({ row: { original: session } }) => (
        <Link
          className="font-medium hover:underline"
          href={`${base}/sessions/${encodeURIComponent(session.id)}`}
        >
          {session.name || <span className="text-muted-foreground italic">unnamed</span>}
        </Link>
      ),
    },
    {
      id: "agent",
      header: "Agent",
      accessorFn: (session) => agentNames.get(session.agentId) ?? session.agentId,
      cell: ({ row: { original: session } }) => (
        <Link className="hover:underline" href={`${base}/agents/${encodeURIComponent(session.agentId)}`}>
          {agentNames.get(session.agentId) ?? (
            <span className="font-mono text-xs">{session.agentId.slice(0, 8)}</span>
          )}
        </Link>
      ),
    },
    {
      id: "workspace",
      header: "Workspace",
      accessorFn: (session) => session.workspaceId,
      cell: ({ row: { original: session } }) => (
        <WorkspaceLink tenantSlug={tenantSlug} workspaceId={session.workspaceId} />
      ),
    },
    {
      id: "status",
      header: "Status",
      accessorFn: (session) => session.status,
      cell: ({ row: { original: session } }) => <StateBadge state={session.status} />,
    },
    {
      id: "lastMessage",
      header: "Last message",
      accessorFn: (session) => session.lastMessageAt?.getTime() ?? 0,
      cell: ({ row: { original: session } }) => <RelativeTime value={session.lastMessageAt} />,
    },
    {
      id: "created",
      header: "Created",
      accessorFn: (session) => session.createdAt.getTime(),
      cell: ({ row: { original: session } }) => <RelativeTime value={session.createdAt} />,
    },
    {
      id: "actions",
      header: () => <span className="sr-only">Actions</span>,
      enableSorting: false,
      cell: ({ row: { original: session } }) =>
        can("session:use", false) ? (
          <div className="flex justify-end">
            <ConfirmDialog
              title={`Delete session ${session.name || "unnamed"}?`}
              description={sessionDeleteConfirmText(session)}
              confirmLabel="Delete session"
              onConfirm={() => remove.mutateAsync({ tenantSlug, sessionId: session.id }).catch(() => {})}
              trigger={
                <Button variant="ghost" size="sm" aria-label="Delete" disabled={remove.isPending}>
                  <Trash2 className="text-destructive" />
                </Button>
              }
            />
          </div>
        ) : null,
    },
  ];

  return (
    <Card>
      {sessions.error ? (
        <div className="p-5">
          <Alert>{sessions.error.message}</Alert>
        </div>
      ) : (
        <DataTable
          label="Sessions"
          columns={columns}
          data={items}
          loading={!sessions.data}
          rowTestId="session-row"
          filterPlaceholder="Filter sessions…"
          initialSorting={[{ id: "created", desc: true }]}
          toolbar={
            <>
              <LiveBadge status={live} />
              <div className="w-48">
                <Select
                  aria-label="Filter by agent"
                  value={agentId ?? ""}
                  onChange={(event) => {
                    const next = event.target.value;
                    // In the URL, so a filtered list can be linked to (the agent page does) and survives a reload.
                    router.replace(
                      next ? `${base}/sessions?agent=${encodeURIComponent(next)}` : `${base}/sessions`,
                    );
                  }}
                  className="[&_select]:h-8"
                >
                  <option value="">All agents</option>
                  {agents.data?.items.map((agent) => (
                    <option key={agent.id} value={agent.id}>
                      {agent.name}
                    </option>
                  ))}
                </Select>
              </div>
            </>
          }
          empty={
            <EmptyState
              icon={MessagesSquare}
              title={agentId ? "No sessions for this agent" : "No sessions yet"}
              description="Start a conversation with an agent; its workspace is provisioned on the first message."
              action={<NewSessionButton tenantSlug={tenantSlug} {...(agentId ? { agentId } : {})} />}
            />
          }
        />
      )}
      <LoadMore query={sessions} />
      {remove.error && (
        <div className="p-5 pt-0">
          <Alert>{remove.error.message}</Alert>
        </div>
      )}
    </Card>
  );
}
