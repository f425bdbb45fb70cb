"use client";

import { useInfiniteQuery } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import { History } from "lucide-react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { Card, CardContent, CardDescription, CardHeader, CardTitle } from "@/app/_components/ui/card";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { cn } from "@/app/_components/ui/cn";
import { useTRPC } from "@/app/_trpc/client";
import type { AppRouter } from "@/server/api/root";
import { formatMs } from "../../readiness/stage-chart";

type Entry = inferRouterOutputs<AppRouter>["operations"]["workspaceTimeline"]["items"][number];

const PAGE_SIZE = 50;
const POLL_MS = 2_000;

/** The dot's colour: the lifecycle's milestones stand out from lease traffic. */
function dotOf(entry: Entry): string {
  if (entry.source === "stage") return entry.ok ? "bg-info" : "bg-destructive";
  if (entry.kind === "failed" || entry.kind === "data_lost") return "bg-destructive";
  if (entry.kind === "provisioned") return "bg-success";
  if (entry.kind.startsWith("lease_") || entry.kind === "bumped") return "bg-border";
  if (entry.kind === "stopped" || entry.kind === "purged") return "bg-muted-foreground";
  return "bg-warning";
}

function EntryText({ entry }: { entry: Entry }) {
  if (entry.source === "stage") {
    const what = entry.kind === "provision" ? "Provision" : "Attach";
    return (
      <span>
        {what} ({entry.path}) took{" "}
        <span className="font-medium tabular-nums">{formatMs(entry.durationMs)}</span>
        {entry.ok ? "" : ", and failed"}
      </span>
    );
  }
  return (
    <span className="flex flex-wrap items-baseline gap-x-2">
      <code className="text-xs">{entry.kind.replace("_", " ")}</code>
      {entry.transition && <code className="text-muted-foreground text-xs">{entry.transition}</code>}
      {entry.reason && <span className="line-clamp-2 max-w-xl text-sm">{entry.reason}</span>}
      <span className="text-muted-foreground text-xs" title={entry.actor}>
        {entry.actorName ?? entry.actor}
      </span>
    </span>
  );
}

/**
 * The workspace's lifecycle in time order (oldest at the top): its events (state changes, bumps, leases)
 * and its measured provisions and attaches, the latest page first, earlier ones on demand. Polls while the
 * workspace is changing state.
 */
export function WorkspaceTimeline({
  tenantSlug,
  workspaceId,
  live,
}: {
  tenantSlug: string;
  workspaceId: string;
  live: boolean;
}) {
  const trpc = useTRPC();
  const timeline = useInfiniteQuery(
    trpc.operations.workspaceTimeline.infiniteQueryOptions(
      { tenantSlug, workspaceId, limit: PAGE_SIZE },
      {
        getNextPageParam: (page) => page.earlier ?? undefined,
        refetchInterval: live ? POLL_MS : false,
      },
    ),
  );
  // Pages arrive newest first, each in time order: reversed, they read top to bottom.
  const entries = timeline.data?.pages.toReversed().flatMap((page) => page.items) ?? [];

  return (
    <Card aria-label="Timeline">
      <CardHeader>
        <div>
          <CardTitle>Timeline</CardTitle>
          <CardDescription>
            What happened to it, in order: state changes, leases and how long each provision took.
          </CardDescription>
        </div>
      </CardHeader>
      <CardContent>
        {timeline.error && <Alert>{timeline.error.message}</Alert>}
        {!timeline.data && !timeline.error && <Skeleton className="h-40 w-full" />}
        {timeline.data && entries.length === 0 && <EmptyState icon={History} title="Nothing recorded yet" />}
        {timeline.hasNextPage && (
          <div className="mb-3 flex justify-center">
            <Button
              variant="outline"
              size="sm"
              disabled={timeline.isFetchingNextPage}
              onClick={() => void timeline.fetchNextPage()}
            >
              {timeline.isFetchingNextPage ? "Loading…" : "Show earlier"}
            </Button>
          </div>
        )}
        <ol className="border-border relative ml-2 border-l" aria-label="Timeline entries">
          {entries.map((entry) => (
            <li
              key={entry.key}
              className="relative py-1.5 pl-5"
              data-testid="timeline-entry"
              data-source={entry.source}
              data-kind={entry.kind}
            >
              <span
                aria-hidden
                className={cn("absolute top-3 -left-[5px] size-2.5 rounded-full", dotOf(entry))}
              />
              <div className="flex flex-col gap-0.5 sm:flex-row sm:items-baseline sm:gap-3">
                <span className="text-muted-foreground w-28 shrink-0 text-xs tabular-nums">
                  <RelativeTime value={entry.at} />
                </span>
                <EntryText entry={entry} />
              </div>
            </li>
          ))}
        </ol>
      </CardContent>
    </Card>
  );
}
