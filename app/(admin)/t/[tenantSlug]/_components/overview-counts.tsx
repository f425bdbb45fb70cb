"use client";

import { useSuspenseQuery } from "@tanstack/react-query";
import { useTRPC } from "@/app/_trpc/client";

const STATS = [
  { key: "agents", label: "Agents" },
  { key: "sessions", label: "Sessions" },
  { key: "workspaces", label: "Workspaces" },
  { key: "activeWorkspaces", label: "Active workspaces" },
  { key: "members", label: "Members" },
  { key: "apiKeys", label: "Active API keys" },
] as const;

type StatKey = (typeof STATS)[number]["key"];

function StatCards({ value }: { value: (key: StatKey) => string }) {
  return (
    <div className="cards">
      {STATS.map(({ key, label }) => (
        <div className="card" key={key} data-testid={`count-${key}`}>
          <div className="stat-label">{label}</div>
          <div className="stat-value">{value(key)}</div>
        </div>
      ))}
    </div>
  );
}

/** Shown while the (server-prefetched) overview streams in. */
export function OverviewCountsSkeleton() {
  return <StatCards value={() => "…"} />;
}

/**
 * Suspends until the overview is there: the server prefetch streams its result to the client, so the
 * server-rendered HTML and the hydrated client agree (no hydration mismatch on the numbers).
 */
export function OverviewCounts({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const { data } = useSuspenseQuery(trpc.tenant.overview.queryOptions({ tenantSlug }));
  return <StatCards value={(key) => String(data.counts[key])} />;
}
