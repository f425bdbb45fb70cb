"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/app/_trpc/client";

const STATS = [
  { key: "agents", label: "Agents" },
  { key: "sessions", label: "Sessions" },
  { key: "workspaces", label: "Workspaces" },
  { key: "activeWorkspaces", label: "Active workspaces" },
  { key: "members", label: "Members" },
  { key: "apiKeys", label: "Active API keys" },
] as const;

export function OverviewCounts({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const overview = useQuery(trpc.tenant.overview.queryOptions({ tenantSlug }));

  if (overview.error) {
    return (
      <div className="alert error" role="alert">
        Could not load the overview: {overview.error.message}
      </div>
    );
  }
  return (
    <div className="cards" aria-busy={overview.isPending}>
      {STATS.map(({ key, label }) => (
        <div className="card" key={key} data-testid={`count-${key}`}>
          <div className="stat-label">{label}</div>
          <div className="stat-value">{overview.data ? overview.data.counts[key] : "…"}</div>
        </div>
      ))}
    </div>
  );
}
