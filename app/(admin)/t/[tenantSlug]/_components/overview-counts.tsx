"use client";

import { Activity, Bot, KeyRound, MessagesSquare, Server, Users } from "lucide-react";
import Link from "next/link";

const STATS = [
  { key: "agents", label: "Agents", icon: Bot, segment: "agents" },
  { key: "sessions", label: "Sessions", icon: MessagesSquare, segment: "sessions" },
  { key: "workspaces", label: "Workspaces", icon: Server, segment: "workspaces" },
  { key: "activeWorkspaces", label: "Active workspaces", icon: Activity, segment: "workspaces" },
  { key: "members", label: "Members", icon: Users, segment: "members" },
  { key: "apiKeys", label: "Active API keys", icon: KeyRound, segment: "api-keys" },
] as const;

type StatKey = (typeof STATS)[number]["key"];

function StatCards({ tenantSlug, value }: { tenantSlug: string; value: (key: StatKey) => string }) {
  return (
    <div className="grid grid-cols-2 gap-3 sm:grid-cols-3 lg:grid-cols-6">
      {STATS.map(({ key, label, icon: Icon, segment }) => (
        <Link
          key={key}
          href={`/t/${encodeURIComponent(tenantSlug)}/${segment}`}
          data-testid={`count-${key}`}
          className="bg-card hover:border-foreground/20 group rounded-xl border p-4 shadow-xs transition-colors"
        >
          <div className="text-muted-foreground flex items-center justify-between text-xs font-medium">
            {label}
            <Icon className="size-4 opacity-60 group-hover:opacity-100" aria-hidden />
          </div>
          <div className="stat-value mt-2 text-2xl font-semibold tabular-nums">{value(key)}</div>
        </Link>
      ))}
    </div>
  );
}

/**
 * The tenant's counts, read on the server for this request and passed in as plain data: the server HTML
 * and the hydrating client render the same markup from the same numbers, with no query cache or streamed
 * Suspense boundary in between (a pending query streamed into hydration raced it: React #418 under load).
 */
export function OverviewCounts({
  tenantSlug,
  counts,
}: {
  tenantSlug: string;
  counts: Record<StatKey, number>;
}) {
  return <StatCards tenantSlug={tenantSlug} value={(key) => String(counts[key])} />;
}
