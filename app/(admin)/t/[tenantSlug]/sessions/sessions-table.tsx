"use client";

import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useTRPC } from "@/app/_trpc/client";
import { formatDate, sessionDeleteConfirmText, WorkspaceLink } from "./session-ui";
import { LoadMore } from "../_components/load-more";

const PAGE_SIZE = 50;
// The filter and the agent names come from one page of agents: the list's maximum page.
const AGENT_LOOKUP_LIMIT = 200;

export function SessionsTable({ tenantSlug, agentId }: { tenantSlug: string; agentId: string | null }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const router = useRouter();
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const agents = useQuery(trpc.agent.list.queryOptions({ tenantSlug, limit: AGENT_LOOKUP_LIMIT }));
  const sessions = useInfiniteQuery(
    trpc.session.list.infiniteQueryOptions(
      { tenantSlug, limit: PAGE_SIZE, ...(agentId ? { agentId } : {}) },
      { getNextPageParam: (page) => page.nextCursor ?? undefined },
    ),
  );
  const remove = useMutation(
    trpc.session.delete.mutationOptions({
      onSuccess: () =>
        Promise.all([
          queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() }),
          queryClient.invalidateQueries({ queryKey: trpc.tenant.overview.queryKey({ tenantSlug }) }),
        ]),
    }),
  );

  const agentNames = new Map(agents.data?.items.map((agent) => [agent.id, agent.name]));
  const items = sessions.data?.pages.flatMap((page) => page.items) ?? [];

  return (
    <div className="panel">
      <div className="form-row" style={{ marginBottom: 16 }}>
        <label>
          Agent
          <select
            aria-label="Filter by agent"
            value={agentId ?? ""}
            onChange={(event) => {
              const next = event.target.value;
              // In the URL, so a filtered list can be linked to (the agent page does) and survives a reload.
              router.replace(
                next ? `${base}/sessions?agent=${encodeURIComponent(next)}` : `${base}/sessions`,
              );
            }}
          >
            <option value="">All agents</option>
            {agents.data?.items.map((agent) => (
              <option key={agent.id} value={agent.id}>
                {agent.name}
              </option>
            ))}
          </select>
        </label>
      </div>
      {sessions.error ? (
        <div className="alert error" role="alert">
          {sessions.error.message}
        </div>
      ) : !sessions.data ? (
        <p className="muted">Loading…</p>
      ) : items.length === 0 ? (
        <p className="muted">{agentId ? "No sessions for this agent." : "No sessions yet."}</p>
      ) : (
        <table className="data">
          <thead>
            <tr>
              <th>Session</th>
              <th>Agent</th>
              <th>Workspace</th>
              <th>Status</th>
              <th>Last message</th>
              <th>Created</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {items.map((session) => (
              <tr key={session.id} data-testid="session-row">
                <td>
                  <Link href={`${base}/sessions/${encodeURIComponent(session.id)}`}>
                    {session.name || <span className="muted">unnamed</span>}
                  </Link>
                  <div className="muted mono">{session.id.slice(0, 8)}</div>
                </td>
                <td>
                  <Link href={`${base}/agents/${encodeURIComponent(session.agentId)}`}>
                    {agentNames.get(session.agentId) ?? (
                      <span className="mono">{session.agentId.slice(0, 8)}</span>
                    )}
                  </Link>
                </td>
                <td>
                  <WorkspaceLink tenantSlug={tenantSlug} workspaceId={session.workspaceId} />
                </td>
                <td>
                  <span className={session.status === "ERROR" ? "badge revoked" : "badge"}>
                    {session.status.toLowerCase()}
                  </span>
                </td>
                <td>{formatDate(session.lastMessageAt)}</td>
                <td>{formatDate(session.createdAt)}</td>
                <td>
                  <button
                    type="button"
                    className="danger"
                    disabled={remove.isPending}
                    onClick={() => {
                      if (window.confirm(sessionDeleteConfirmText(session)))
                        remove.mutate({ tenantSlug, sessionId: session.id });
                    }}
                  >
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <LoadMore query={sessions} />
      {remove.error && (
        <div className="alert error" role="alert" style={{ marginTop: 12 }}>
          {remove.error.message}
        </div>
      )}
    </div>
  );
}
