"use client";

import { useInfiniteQuery } from "@tanstack/react-query";
import { useTRPC } from "@/app/_trpc/client";
import { LoadMore } from "../_components/load-more";

const PAGE_SIZE = 50;

export function AuditTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const audit = useInfiniteQuery(
    trpc.audit.list.infiniteQueryOptions(
      { tenantSlug, limit: PAGE_SIZE },
      { getNextPageParam: (page) => page.nextCursor ?? undefined },
    ),
  );
  if (audit.error) {
    return (
      <div className="alert error" role="alert">
        {audit.error.message}
      </div>
    );
  }
  if (!audit.data) return <p className="muted">Loading…</p>;
  const entries = audit.data.pages.flatMap((page) => page.items);
  if (entries.length === 0) return <p className="muted">Nothing recorded yet.</p>;
  return (
    <div className="panel">
      <table className="data">
        <thead>
          <tr>
            <th>When</th>
            <th>Action</th>
            <th>Actor</th>
            <th>Target</th>
            <th>Outcome</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((entry) => (
            <tr key={entry.id}>
              <td>{entry.at.toLocaleString()}</td>
              <td className="mono">{entry.action}</td>
              <td>
                {entry.actorType}
                {entry.actorId ? <span className="muted mono"> {entry.actorId.slice(0, 8)}</span> : null}
              </td>
              <td>
                {entry.targetType ?? "—"}
                {entry.targetId ? <span className="muted mono"> {entry.targetId.slice(0, 8)}</span> : null}
              </td>
              <td>
                <span className={entry.outcome === "success" ? "badge" : "badge revoked"}>
                  {entry.outcome}
                </span>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <LoadMore query={audit} />
    </div>
  );
}
