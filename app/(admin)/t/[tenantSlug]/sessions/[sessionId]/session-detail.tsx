"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { useTRPC } from "@/app/_trpc/client";
import { formatDate, sessionDeleteConfirmText, WorkspaceLink } from "../session-ui";
import { MessageView } from "./message-view";

// chat.history's largest page; the next page starts after the last message shown.
const HISTORY_PAGE = 200;

function HistoryPage({
  tenantSlug,
  sessionId,
  afterId,
  isLast,
  onMore,
}: {
  tenantSlug: string;
  sessionId: string;
  afterId: string | undefined;
  isLast: boolean;
  onMore: (lastId: string) => void;
}) {
  const trpc = useTRPC();
  const page = useQuery(
    trpc.chat.history.queryOptions({
      tenantSlug,
      sessionId,
      limit: HISTORY_PAGE,
      ...(afterId ? { afterId } : {}),
    }),
  );
  if (page.error) {
    return (
      <li className="alert error" role="alert">
        {page.error.message}
      </li>
    );
  }
  if (!page.data) return <li className="muted">Loading…</li>;
  if (page.data.length === 0 && afterId === undefined) {
    return <li className="muted">No messages yet.</li>;
  }
  const last = page.data.at(-1);
  return (
    <>
      {page.data.map((message) => (
        <MessageView key={message.id} message={message} />
      ))}
      {isLast && last && page.data.length === HISTORY_PAGE && (
        <li>
          <button type="button" className="secondary" onClick={() => onMore(last.id)}>
            Load more
          </button>
        </li>
      )}
    </>
  );
}

export function SessionDetail({ tenantSlug, sessionId }: { tenantSlug: string; sessionId: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const router = useRouter();
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const session = useQuery(trpc.session.get.queryOptions({ tenantSlug, sessionId }));
  const agentId = session.data?.agentId;
  const agent = useQuery({
    ...trpc.agent.get.queryOptions({ tenantSlug, agentId: agentId ?? "" }),
    enabled: agentId !== undefined,
  });
  // Each page starts after the previous page's last message (undefined: from the beginning).
  const [pageStarts, setPageStarts] = useState<(string | undefined)[]>([undefined]);
  const remove = useMutation(
    trpc.session.delete.mutationOptions({
      onSuccess: async () => {
        await Promise.all([
          queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() }),
          queryClient.invalidateQueries({ queryKey: trpc.tenant.overview.queryKey({ tenantSlug }) }),
        ]);
        router.push(`${base}/sessions`);
      },
    }),
  );

  if (session.error) {
    return (
      <div className="alert error" role="alert">
        {session.error.message}
      </div>
    );
  }
  if (!session.data) return <p className="muted">Loading…</p>;
  const current = session.data;

  return (
    <>
      <h1>{current.name || "Unnamed session"}</h1>
      <section className="panel" aria-label="Session">
        <table className="data">
          <tbody>
            <tr>
              <th>Agent</th>
              <td>
                <Link href={`${base}/agents/${encodeURIComponent(current.agentId)}`}>
                  {agent.data?.name ?? current.agentId}
                </Link>
              </td>
            </tr>
            <tr>
              <th>Workspace</th>
              <td>
                <WorkspaceLink tenantSlug={tenantSlug} workspaceId={current.workspaceId} />
              </td>
            </tr>
            <tr>
              <th>Status</th>
              <td>
                <span className="badge">{current.status.toLowerCase()}</span>
              </td>
            </tr>
            <tr>
              <th>Created</th>
              <td>{formatDate(current.createdAt)}</td>
            </tr>
            <tr>
              <th>Last message</th>
              <td>{formatDate(current.lastMessageAt)}</td>
            </tr>
          </tbody>
        </table>
        <button
          type="button"
          className="danger"
          style={{ marginTop: 12 }}
          disabled={remove.isPending}
          onClick={() => {
            if (window.confirm(sessionDeleteConfirmText(current))) remove.mutate({ tenantSlug, sessionId });
          }}
        >
          Delete session
        </button>
        {remove.error && (
          <div className="alert error" role="alert" style={{ marginTop: 12 }}>
            {remove.error.message}
          </div>
        )}
      </section>

      <section className="panel" aria-labelledby="history-heading">
        <h2 id="history-heading">History</h2>
        <p className="muted">Read-only: the conversation as stored, tool calls and their results included.</p>
        <ol className="messages">
          {pageStarts.map((afterId, index) => (
            <HistoryPage
              key={afterId ?? "start"}
              tenantSlug={tenantSlug}
              sessionId={sessionId}
              afterId={afterId}
              isLast={index === pageStarts.length - 1}
              onMore={(lastId) => setPageStarts((starts) => [...starts, lastId])}
            />
          ))}
        </ol>
      </section>
    </>
  );
}
