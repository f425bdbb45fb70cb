"use client";

import { useSuspenseQuery } from "@tanstack/react-query";
import { Activity, Bot, KeyRound, MessagesSquare, Server, Users } from "lucide-react";
import Link from "next/link";
import { useTRPC } from "@/app/_trpc/client";

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

/** Shown while the (server-prefetched) overview streams in. */
export function OverviewCountsSkeleton({ tenantSlug }: { tenantSlug: string }) {
  return <StatCards tenantSlug={tenantSlug} value={() => "…"} />;
}

/**
 * Suspends until the overview is there: the server prefetch streams its result to the client, so the
 * server-rendered HTML and the hydrated client agree (no hydration mismatch on the numbers).
 */
export function OverviewCounts({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const { data } = useSuspenseQuery(trpc.tenant.overview.queryOptions({ tenantSlug }));
  return <StatCards tenantSlug={tenantSlug} value={(key) => String(data.counts[key])} />;
}
