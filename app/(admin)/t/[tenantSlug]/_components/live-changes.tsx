"use client";

import { type QueryFilters, useQueryClient } from "@tanstack/react-query";
import { useSubscription } from "@trpc/tanstack-react-query";
import { useEffect, useRef, useState } from "react";
import { useTRPC } from "@/app/_trpc/client";
import { cn } from "@/app/_components/ui/cn";
import type { ChangeTopic } from "@/server/modules/live/change-feed";
import type { LiveEvent } from "@/server/modules/live/change-stream";

/** Changes arriving within this window refetch once (a bulk stop of fifty workspaces is one refetch). */
const COALESCE_MS = 150;

export type LiveStatus = "connecting" | "live" | "reconnecting";

/**
 * A page's live updates: ONE `live.changes` subscription (server-sent events through any API replica) for
 * the topics the page shows; each change, and each (re)connection (what was missed meanwhile), invalidates
 * `queries`, so React Query refetches what is on screen. `onChange` sees each change too (a page that wants
 * the id). Returns the stream's status for a `LiveBadge`.
 */
export function useLiveChanges(
  tenantSlug: string,
  topics: ChangeTopic[],
  queries: QueryFilters[],
  onChange?: (event: LiveEvent) => void,
): LiveStatus {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  // Set by the stream's `ready` event: a later connecting/error state is a reconnection.
  const [everReady, setEverReady] = useState(false);
  const latest = useRef({ queries, onChange });
  useEffect(() => {
    latest.current = { queries, onChange };
  });
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(
    () => () => {
      if (timer.current) clearTimeout(timer.current);
    },
    [],
  );

  const subscription = useSubscription(
    trpc.live.changes.subscriptionOptions(
      { tenantSlug, topics },
      {
        onData: (event) => {
          if (event.topic === "ready") setEverReady(true);
          latest.current.onChange?.(event);
          if (timer.current) return;
          timer.current = setTimeout(() => {
            timer.current = null;
            for (const filters of latest.current.queries) void queryClient.invalidateQueries(filters);
          }, COALESCE_MS);
        },
      },
    ),
  );
  if (subscription.status === "pending" && everReady) return "live";
  return everReady ? "reconnecting" : "connecting";
}

/** "Live" when the page's change stream is connected (data-live-status for tests and people alike). */
export function LiveBadge({ status, className }: { status: LiveStatus; className?: string }) {
  const label = status === "live" ? "Live" : status === "connecting" ? "Connecting…" : "Reconnecting…";
  return (
    <span
      data-testid="live-status"
      data-live-status={status}
      title={
        status === "live"
          ? "This page updates by itself as things change."
          : "Live updates are not connected; the page refreshes when they are back."
      }
      className={cn("text-muted-foreground inline-flex items-center gap-1.5 text-xs", className)}
    >
      <span
        aria-hidden
        className={cn(
          "size-2 rounded-full",
          status === "live" ? "bg-emerald-500" : "animate-pulse bg-amber-500",
        )}
      />
      {label}
    </span>
  );
}
