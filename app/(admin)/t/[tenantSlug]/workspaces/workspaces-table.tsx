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
  BACKEND_LIST,
  BackendLabel,
  formatDuration,
  TRANSITIONAL_STATES,
  WORKSPACE_STATE_LIST,
  WorkspaceStateBadge,
} from "./workspace-format";
import { FilterSelect } from "../_components/filter-select";
import { LoadMore } from "../_components/load-more";

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
 * "Load more", each with its agent's name. Polls while one of the loaded workspaces is changing state.
 */
export function WorkspacesTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const [state, setState] = useState("");
  const [backend, setBackend] = useState("");
  const [agentId, setAgentId] = useState("");
  const [idle, setIdle] = useState("");
  const [leased, setLeased] = useState("");
  const agents = useQuery(trpc.agent.list.queryOptions({ tenantSlug, limit: AGENT_LOOKUP_LIMIT }));
  const states = WORKSPACE_STATE_LIST.filter((value) => value === state);
  const backends = BACKEND_LIST.filter((value) => value === backend);
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
        // Workers move these on by themselves; poll only while one is on its way somewhere.
        refetchInterval: (query) =>
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

  const columns: ColumnDef<WorkspaceRow, unknown>[] = [
    {
      id: "workspace",
      header: "Workspace",
      accessorFn: (workspace) => workspace.id,
      cell: ({ row: { original: workspace } }) => (
        <span className="inline-flex items-center gap-0.5">
          <Link
            className="font-mono text-xs font-medium hover:underline"
            href={`${base}/workspaces/${encodeURIComponent(workspace.id)}`}
          >
            {workspace.id}
          </Link>
          <CopyButton value={workspace.id} label="Copy workspace id" />
        </span>
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
      cell: ({ row: { original: workspace } }) => String(workspace.activeLeases),
    },
    {
      id: "lastActivity",
      header: "Last activity",
      accessorFn: (workspace) => workspace.lastActivityAt?.getTime() ?? 0,
      cell: ({ row: { original: workspace } }) => <RelativeTime value={workspace.lastActivityAt} />,
    },
  ];

  return (
    <Card>
      {workspaces.error ? (
        <div className="p-5">
          <Alert>{workspaces.error.message}</Alert>
        </div>
      ) : (
        <DataTable
          label="Workspaces"
          columns={columns}
          data={items}
          loading={!workspaces.data}
          rowTestId="workspace-row"
          filterPlaceholder="Filter workspaces…"
          toolbar={
            <>
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
                options={BACKEND_LIST.map((value) => ({ value, label: value }))}
              />
              <FilterSelect
                label="Filter by agent"
                value={agentId}
                onChange={setAgentId}
                anyLabel="All agents"
                className="w-48"
                options={(agents.data?.items ?? []).map((agent) => ({ value: agent.id, label: agent.name }))}
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
              description={filtered ? undefined : "One is created the first time a session of an agent runs."}
            />
          }
        />
      )}
      <LoadMore query={workspaces} />
    </Card>
  );
}
