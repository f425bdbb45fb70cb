"use client";

import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import { Server } from "lucide-react";
import Link from "next/link";
import { useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Card } from "@/app/_components/ui/card";
import { CopyButton } from "@/app/_components/ui/copy-button";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { useTRPC } from "@/app/_trpc/client";
import type { AppRouter } from "@/server/api/root";
import {
  BackendLabel,
  formatDuration,
  TRANSITIONAL_STATES,
  WORKSPACE_STATE_LIST,
  WorkspaceStateBadge,
} from "./workspace-format";
import { FilterSelect } from "../_components/filter-select";
import { LiveBadge, useLiveChanges } from "../_components/live-changes";
import { LoadMore } from "../_components/load-more";
import { useTenantRole } from "../_components/tenant-role";
import {
  BulkActionBar,
  BulkOutcomes,
  RowActions,
  useWorkspaceActions,
  WorkspaceRenameDialog,
} from "./workspace-bulk-actions";

type WorkspaceRow = inferRouterOutputs<AppRouter>["workspace"]["list"]["items"][number];

const PAGE_SIZE = 50;
const POLL_MS = 2_000;
const AGENT_LOOKUP_LIMIT = 200;
const IDLE_FILTERS = [
  { value: "3600000", label: "Idle > 1 hour" },
  { value: "86400000", label: "Idle > 1 day" },
  { value: "604800000", label: "Idle > 7 days" },
];
const STATE_FILTERS = WORKSPACE_STATE_LIST.map((value) => ({ value, label: value.toLowerCase() }));

/**
 * The tenant's workspaces, filtered on the server (state, backend, agent, idle time, leases) and paged with
 * "Load more", each with its name and its agent's. Live: the page's change stream refetches the list when a
 * workspace changes anywhere (it polls only while the stream is down and a workspace is changing state).
 * Admins stop, start, purge and rename per row, or the selected rows at once.
 */
export function WorkspacesTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const [state, setState] = useState("");
  const [backend, setBackend] = useState("");
  const [agentId, setAgentId] = useState("");
  const [idle, setIdle] = useState("");
  const [leased, setLeased] = useState("");
  const [selectedIds, setSelectedIds] = useState<ReadonlySet<string>>(new Set());
  // Outside the rows: a cell remounts on every live update, which would close a dialog kept there.
  const [renaming, setRenaming] = useState<{ id: string; label: string | null } | null>(null);
  const canManage = useTenantRole(tenantSlug).can("workspace:manage", false);
  const live = useLiveChanges(tenantSlug, ["workspace"], [trpc.workspace.list.pathFilter()]);
  const actions = useWorkspaceActions(tenantSlug, () => setSelectedIds(new Set()));
  const agents = useQuery(trpc.agent.list.queryOptions({ tenantSlug, limit: AGENT_LOOKUP_LIMIT }));
  const states = WORKSPACE_STATE_LIST.filter((value) => value === state);
  // The installation's backends, from their drivers (workspace.backends): a new driver needs no list here.
  const backendOptions = useQuery(trpc.workspace.backends.queryOptions({ tenantSlug }));
  const backends = backend ? [backend] : [];
  const filters = {
    ...(states.length > 0 ? { states } : {}),
    ...(backends.length > 0 ? { backendKinds: backends } : {}),
    ...(agentId ? { agentId } : {}),
    ...(idle ? { idleForMs: Number(idle) } : {}),
    ...(leased ? { leased: leased === "leased" } : {}),
  };
  const filtered = Object.keys(filters).length > 0;
  const workspaces = useInfiniteQuery(
    trpc.workspace.list.infiniteQueryOptions(
      { tenantSlug, limit: PAGE_SIZE, ...filters },
      {
        getNextPageParam: (page) => page.nextCursor ?? undefined,
        // The change stream refetches; without it, poll while a workspace is on its way somewhere.
        refetchInterval: (query) =>
          live !== "live" &&
          query.state.data?.pages.some((page) =>
            page.items.some((item) => TRANSITIONAL_STATES.includes(item.state)),
          )
            ? POLL_MS
            : false,
      },
    ),
  );
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const items = workspaces.data?.pages.flatMap((page) => page.items) ?? [];
  const selected = items.filter((workspace) => selectedIds.has(workspace.id));
  const toggle = (ids: string[], on: boolean) =>
    setSelectedIds((current) => {
      const next = new Set(current);
      for (const id of ids) {
        if (on) next.add(id);
        else next.delete(id);
      }
      return next;
    });

  const selectColumn: ColumnDef<WorkspaceRow, unknown> = {
    id: "select",
    enableSorting: false,
    header: ({ table }) => {
      const shown = table.getFilteredRowModel().rows.map((row) => row.original.id);
      const all = shown.length > 0 && shown.every((id) => selectedIds.has(id));
      return (
        <input
          type="checkbox"
          aria-label="Select all shown workspaces"
          checked={all}
          onChange={(event) => toggle(shown, event.target.checked)}
        />
      );
    },
    cell: ({ row: { original: workspace } }) => (
      <input
        type="checkbox"
        aria-label={`Select ${workspace.id}`}
        data-testid="workspace-select"
        checked={selectedIds.has(workspace.id)}
        onChange={(event) => toggle([workspace.id], event.target.checked)}
      />
    ),
  };
  const actionsColumn: ColumnDef<WorkspaceRow, unknown> = {
    id: "actions",
    header: "",
    enableSorting: false,
    cell: ({ row: { original: workspace } }) => (
      <RowActions workspace={workspace} run={actions.run} pending={actions.pending} onRename={setRenaming} />
    ),
  };
  const columns: ColumnDef<WorkspaceRow, unknown>[] = [
    ...(canManage ? [selectColumn] : []),
    {
      id: "workspace",
      header: "Workspace",
      // The text filter finds a workspace by its name or its id.
      accessorFn: (workspace) => `${workspace.label ?? ""} ${workspace.id}`,
      cell: ({ row: { original: workspace } }) => (
        <div className="grid">
          {workspace.label && (
            <span className="text-sm font-medium" data-testid="workspace-label">
              {workspace.label}
            </span>
          )}
          <span className="inline-flex items-center gap-0.5">
            <Link
              className={
                workspace.label
                  ? "text-muted-foreground font-mono text-xs hover:underline"
                  : "font-mono text-xs font-medium hover:underline"
              }
              href={`${base}/workspaces/${encodeURIComponent(workspace.id)}`}
            >
              {workspace.id}
            </Link>
            <CopyButton value={workspace.id} label="Copy workspace id" />
          </span>
        </div>
      ),
    },
    {
      id: "state",
      header: "State",
      accessorFn: (workspace) => workspace.state,
      cell: ({ row: { original: workspace } }) => (
        <div className="max-w-64">
          <WorkspaceStateBadge state={workspace.state} />
          {workspace.error && (
            <div className="text-destructive mt-1 line-clamp-2 text-xs" title={workspace.error}>
              {workspace.error}
            </div>
          )}
        </div>
      ),
    },
    {
      id: "backend",
      header: "Backend",
      accessorFn: (workspace) => workspace.backendKind,
      cell: ({ row: { original: workspace } }) => (
        <BackendLabel kind={workspace.backendKind} trustedOnly={workspace.trustedOnly} />
      ),
    },
    {
      id: "agent",
      header: "Agent",
      accessorFn: (workspace) => workspace.agentName ?? workspace.agentId ?? "",
      cell: ({ row: { original: workspace } }) =>
        workspace.agentId ? (
          <Link className="hover:underline" href={`${base}/agents/${encodeURIComponent(workspace.agentId)}`}>
            {workspace.agentName ?? (
              <span className="font-mono text-xs">{workspace.agentId.slice(0, 8)}</span>
            )}
          </Link>
        ) : (
          <span className="text-muted-foreground">—</span>
        ),
    },
    {
      id: "idle",
      header: "Idle",
      accessorFn: (workspace) => workspace.idleMs ?? -1,
      cell: ({ row: { original: workspace } }) => formatDuration(workspace.idleMs),
    },
    {
      id: "leases",
      header: "Leases",
      accessorFn: (workspace) => workspace.activeLeases,
      cell: ({ row: { original: workspace } }) => (
        <span data-testid="workspace-leases">{workspace.activeLeases}</span>
      ),
    },
    {
      id: "lastActivity",
      header: "Last activity",
      accessorFn: (workspace) => workspace.lastActivityAt?.getTime() ?? 0,
      cell: ({ row: { original: workspace } }) => <RelativeTime value={workspace.lastActivityAt} />,
    },
    ...(canManage ? [actionsColumn] : []),
  ];

  return (
    <Card>
      {workspaces.error ? (
        <div className="p-5">
          <Alert>{workspaces.error.message}</Alert>
        </div>
      ) : (
        <>
          <BulkOutcomes answer={actions.last} error={actions.error} onDismiss={actions.dismiss} />
          {canManage && <BulkActionBar selected={selected} run={actions.run} pending={actions.pending} />}
          <DataTable
            label="Workspaces"
            columns={columns}
            data={items}
            loading={!workspaces.data}
            rowTestId="workspace-row"
            filterPlaceholder="Filter workspaces…"
            toolbar={
              <>
                <LiveBadge status={live} />
                <FilterSelect
                  label="Filter by state"
                  value={state}
                  onChange={setState}
                  anyLabel="All states"
                  options={STATE_FILTERS}
                />
                <FilterSelect
                  label="Filter by backend"
                  value={backend}
                  onChange={setBackend}
                  anyLabel="All backends"
                  options={(backendOptions.data?.available ?? []).map((option) => ({
                    value: option.kind,
                    label: option.label,
                  }))}
                />
                <FilterSelect
                  label="Filter by agent"
                  value={agentId}
                  onChange={setAgentId}
                  anyLabel="All agents"
                  className="w-48"
                  options={(agents.data?.items ?? []).map((agent) => ({
                    value: agent.id,
                    label: agent.name,
                  }))}
                />
                <FilterSelect
                  label="Filter by idle time"
                  value={idle}
                  onChange={setIdle}
                  anyLabel="Any idle time"
                  options={IDLE_FILTERS}
                />
                <FilterSelect
                  label="Filter by leases"
                  value={leased}
                  onChange={setLeased}
                  anyLabel="Leased or not"
                  options={[
                    { value: "leased", label: "Leased now" },
                    { value: "free", label: "No lease" },
                  ]}
                />
              </>
            }
            empty={
              <EmptyState
                icon={Server}
                title={filtered ? "No workspace matches these filters" : "No workspaces yet"}
                description={
                  filtered ? undefined : "One is created the first time a session of an agent runs."
                }
              />
            }
          />
        </>
      )}
      <LoadMore query={workspaces} />
      <WorkspaceRenameDialog tenantSlug={tenantSlug} workspace={renaming} onClose={() => setRenaming(null)} />
    </Card>
  );
}
