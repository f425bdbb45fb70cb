"use client";

import { useInfiniteQuery } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import { History } from "lucide-react";
import { useState } from "react";
import { Alert } from "@/app/_components/ui/alert";
import { Card } from "@/app/_components/ui/card";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { useTRPC } from "@/app/_trpc/client";
import type { AppRouter } from "@/server/api/root";
import type { WorkspaceEventKind } from "@/server/modules/workspace/workspace.types";
import { FilterSelect } from "../../_components/filter-select";
import { LoadMore } from "../../_components/load-more";
import { EVENT_KIND_LIST, EventKindLabel, eventKindLabel, TRANSITION_KIND_LIST } from "../workspace-format";

type EventRow = inferRouterOutputs<AppRouter>["workspace"]["events"]["items"][number];

const PAGE_SIZE = 50;
const POLL_MS = 2_000;

/** The filter's choices: every kind, plus "state changes" (all transitions at once). */
const KIND_FILTERS: Record<string, readonly WorkspaceEventKind[]> = {
  transitions: TRANSITION_KIND_LIST,
  ...Object.fromEntries(EVENT_KIND_LIST.map((kind) => [kind, [kind]])),
};

function transitionOf(data: unknown): string | null {
  if (!data || typeof data !== "object") return null;
  const { from, to } = data as { from?: unknown; to?: unknown };
  return typeof from === "string" && typeof to === "string" ? `${from} → ${to}` : null;
}

function actorOf(event: EventRow): string {
  if (event.actorName) return event.actorName;
  const [type, id] = event.actor.split(":");
  return id && (type === "user" || type === "api_key") ? `${type} ${id.slice(0, 8)}` : event.actor;
}

/**
 * The workspace's ledger, newest first, a page at a time, filtered by kind on the server: why it is in its
 * state, who asked, which leases held it. Polls the first page while the workspace is changing state.
 */
export function WorkspaceEvents({
  tenantSlug,
  workspaceId,
  live,
}: {
  tenantSlug: string;
  workspaceId: string;
  live: boolean;
}) {
  const trpc = useTRPC();
  const [filter, setFilter] = useState("");
  const kinds = filter ? [...(KIND_FILTERS[filter] ?? [])] : undefined;
  const events = useInfiniteQuery(
    trpc.workspace.events.infiniteQueryOptions(
      { tenantSlug, workspaceId, limit: PAGE_SIZE, ...(kinds ? { kinds } : {}) },
      { getNextPageParam: (page) => page.nextCursor ?? undefined, refetchInterval: live ? POLL_MS : false },
    ),
  );
  const rows = events.data?.pages.flatMap((page) => page.items) ?? [];

  const columns: ColumnDef<EventRow, unknown>[] = [
    {
      id: "at",
      header: "When",
      accessorFn: (event) => event.at.getTime(),
      cell: ({ row: { original: event } }) => <RelativeTime value={event.at} />,
    },
    {
      id: "kind",
      header: "Event",
      accessorFn: (event) => event.kind,
      cell: ({ row: { original: event } }) => <EventKindLabel kind={event.kind} />,
    },
    {
      id: "reason",
      header: "Reason",
      accessorFn: (event) => event.reason ?? "",
      cell: ({ row: { original: event } }) =>
        event.reason ? (
          <span className="line-clamp-2 max-w-md text-sm">{event.reason}</span>
        ) : (
          <span className="text-muted-foreground">—</span>
        ),
    },
    {
      id: "change",
      header: "Change",
      accessorFn: (event) => transitionOf(event.data) ?? "",
      cell: ({ getValue }) => <code className="text-xs whitespace-nowrap">{String(getValue())}</code>,
    },
    { id: "actor", header: "Actor", accessorFn: actorOf },
  ];

  return (
    <Card>
      {events.error ? (
        <div className="p-5">
          <Alert>{events.error.message}</Alert>
        </div>
      ) : (
        <DataTable
          label="Events"
          columns={columns}
          data={rows}
          loading={!events.data}
          rowTestId="event-row"
          pageSize={PAGE_SIZE * 10}
          toolbar={
            <FilterSelect
              label="Filter by event kind"
              value={filter}
              onChange={setFilter}
              anyLabel="All events"
              className="w-48"
              options={[
                { value: "transitions", label: "State changes" },
                ...EVENT_KIND_LIST.map((kind) => ({ value: kind, label: eventKindLabel(kind) })),
              ]}
            />
          }
          empty={
            <EmptyState icon={History} title={filter ? "No events of this kind" : "Nothing recorded yet"} />
          }
        />
      )}
      <LoadMore query={events} />
    </Card>
  );
}
