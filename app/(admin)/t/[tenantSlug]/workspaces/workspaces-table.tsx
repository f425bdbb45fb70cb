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
import { Select } from "@/app/_components/ui/select";
import { useTRPC } from "@/app/_trpc/client";
import type { AppRouter } from "@/server/api/root";
import { BackendLabel, formatDuration, TRANSITIONAL_STATES, WorkspaceStateBadge } from "./workspace-format";
import { LoadMore } from "../_components/load-more";

type WorkspaceRow = inferRouterOutputs<AppRouter>["workspace"]["list"]["items"][number];

const PAGE_SIZE = 50;
const POLL_MS = 2_000;
const AGENT_LOOKUP_LIMIT = 200;
const IDLE_FILTERS = [
  { value: "", label: "Any idle time" },
  { value: "3600000", label: "Idle > 1 hour" },
  { value: "86400000", label: "Idle > 1 day" },
  { value: "604800000", label: "Idle > 7 days" },
];

export function WorkspacesTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const [state, setState] = useState("");
  const [backend, setBackend] = useState("");
  const [agentId, setAgentId] = useState("");
  const [idle, setIdle] = useState("");
  const [leased, setLeased] = useState("");
  const agents = useQuery(trpc.agent.list.queryOptions({ tenantSlug, limit: AGENT_LOOKUP_LIMIT }));
  const workspaces = useInfiniteQuery(
    trpc.workspace.list.infiniteQueryOptions(
      { tenantSlug, limit: PAGE_SIZE },
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
  const agentNames = new Map(agents.data?.items.map((agent) => [agent.id, agent.name]));
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const all = workspaces.data?.pages.flatMap((page) => page.items) ?? [];
  const backends = [...new Set(all.map((item) => item.backendKind))].sort();
  // Filters apply to the loaded pages ("Load more" brings in the rest).
  const items = all.filter(
    (item) =>
      (!state || item.state === state) &&
      (!backend || item.backendKind === backend) &&
      (!agentId || item.agentId === agentId) &&
      (!idle || (item.idleMs ?? 0) >= Number(idle)) &&
      (!leased || (leased === "leased" ? item.activeLeases > 0 : item.activeLeases === 0)),
  );

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
      accessorFn: (workspace) =>
        workspace.agentId ? (agentNames.get(workspace.agentId) ?? workspace.agentId) : "",
      cell: ({ row: { original: workspace } }) =>
        workspace.agentId ? (
          <Link className="hover:underline" href={`${base}/agents/${encodeURIComponent(workspace.agentId)}`}>
            {agentNames.get(workspace.agentId) ?? (
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

  const filter = (
    label: string,
    value: string,
    onChange: (value: string) => void,
    options: { value: string; label: string }[],
  ) => (
    <div className="w-40">
      <Select
        aria-label={label}
        value={value}
        onChange={(event) => onChange(event.target.value)}
        className="[&_select]:h-8"
      >
        {options.map((option) => (
          <option key={option.value} value={option.value}>
            {option.label}
          </option>
        ))}
      </Select>
    </div>
  );

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
              {filter("Filter by state", state, setState, [
                { value: "", label: "All states" },
                ...["PENDING", "PROVISIONING", "READY", "STOPPING", "STOPPED", "FAILED", "PURGED"].map(
                  (value) => ({
                    value,
                    label: value.toLowerCase(),
                  }),
                ),
              ])}
              {filter("Filter by backend", backend, setBackend, [
                { value: "", label: "All backends" },
                ...backends.map((value) => ({ value, label: value })),
              ])}
              {filter("Filter by agent", agentId, setAgentId, [
                { value: "", label: "All agents" },
                ...(agents.data?.items ?? []).map((agent) => ({ value: agent.id, label: agent.name })),
              ])}
              {filter("Filter by idle time", idle, setIdle, IDLE_FILTERS)}
              {filter("Filter by leases", leased, setLeased, [
                { value: "", label: "Leased or not" },
                { value: "leased", label: "Leased now" },
                { value: "free", label: "No lease" },
              ])}
            </>
          }
          empty={
            <EmptyState
              icon={Server}
              title={all.length === 0 ? "No workspaces yet" : "No workspace matches these filters"}
              description={
                all.length === 0 ? "One is created the first time a session of an agent runs." : undefined
              }
            />
          }
        />
      )}
      <LoadMore query={workspaces} />
    </Card>
  );
}
