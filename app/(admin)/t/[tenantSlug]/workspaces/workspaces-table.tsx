"use client";

import { useInfiniteQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useTRPC } from "@/app/_trpc/client";
import {
  BackendLabel,
  formatDate,
  formatDuration,
  TRANSITIONAL_STATES,
  WorkspaceStateBadge,
} from "./workspace-format";
import { LoadMore } from "../_components/load-more";

const PAGE_SIZE = 50;
const POLL_MS = 2_000;

export function WorkspacesTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
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
  if (workspaces.error) {
    return (
      <div className="alert error" role="alert">
        {workspaces.error.message}
      </div>
    );
  }
  if (!workspaces.data) return <p className="muted">Loading…</p>;
  const items = workspaces.data.pages.flatMap((page) => page.items);
  if (items.length === 0) {
    return (
      <p className="muted">No workspaces yet. One is created the first time a session of an agent runs.</p>
    );
  }
  const base = `/t/${encodeURIComponent(tenantSlug)}/workspaces`;
  return (
    <div className="panel">
      <table className="data">
        <thead>
          <tr>
            <th>Workspace</th>
            <th>State</th>
            <th>Backend</th>
            <th>Agent</th>
            <th>Idle</th>
            <th>Leases</th>
            <th>Last activity</th>
          </tr>
        </thead>
        <tbody>
          {items.map((workspace) => (
            <tr key={workspace.id} data-testid="workspace-row">
              <td className="mono">
                <Link href={`${base}/${encodeURIComponent(workspace.id)}`}>{workspace.id}</Link>
              </td>
              <td>
                <WorkspaceStateBadge state={workspace.state} />
                {workspace.error && (
                  <div className="muted" style={{ fontSize: 12 }}>
                    {workspace.error.slice(0, 120)}
                  </div>
                )}
              </td>
              <td>
                <BackendLabel kind={workspace.backendKind} trustedOnly={workspace.trustedOnly} />
              </td>
              <td className="mono">{workspace.agentId ? workspace.agentId.slice(0, 8) : "—"}</td>
              <td>{formatDuration(workspace.idleMs)}</td>
              <td>{workspace.activeLeases}</td>
              <td>{formatDate(workspace.lastActivityAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <LoadMore query={workspaces} />
    </div>
  );
}
