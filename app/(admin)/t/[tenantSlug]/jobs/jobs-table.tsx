"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import { Activity, RefreshCw, RotateCcw } from "lucide-react";
import Link from "next/link";
import { useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { StateBadge } from "@/app/_components/ui/badge";
import { Button } from "@/app/_components/ui/button";
import { Card } from "@/app/_components/ui/card";
import { type ColumnDef, DataTable } from "@/app/_components/ui/data-table";
import { EmptyState } from "@/app/_components/ui/empty-state";
import { RelativeTime } from "@/app/_components/ui/relative-time";
import { Select } from "@/app/_components/ui/select";
import { useTRPC } from "@/app/_trpc/client";
import type { AppRouter } from "@/server/api/root";
import { JOB_RETENTION } from "@/server/queue/retention";
import { LiveBadge, useLiveChanges } from "../_components/live-changes";

type JobRow = inferRouterOutputs<AppRouter>["jobs"]["list"][number];

const JOB_STATES = ["active", "waiting", "delayed", "completed", "failed"] as const;
type JobState = (typeof JOB_STATES)[number];
const UNFINISHED = new Set(["active", "waiting", "delayed", "waiting-children", "prioritized"]);
const POLL_MS = 1_000;
const hours = (seconds: number) => `${Math.round(seconds / 3600)} h`;
// The queues' retention window (server/queue/retention.ts): what this page can show of past jobs.
const RETENTION_TEXT = `${hours(JOB_RETENTION.completed.age)} when completed and ${hours(JOB_RETENTION.failed.age)} when failed (at most ${JOB_RETENTION.completed.count} completed per queue)`;
const LIMIT = 100;

/** The workspace a job is about, when its payload names one (most of them do). */
function workspaceOf(data: unknown): string | null {
  const id = (data as { workspaceId?: unknown } | null)?.workspaceId;
  return typeof id === "string" ? id : null;
}

export function JobsTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const base = `/t/${encodeURIComponent(tenantSlug)}`;
  const [state, setState] = useState<JobState | "">("");
  // Workers tell the change stream when a job starts, completes or fails; a stop or purge asked for on any
  // replica shows up with its workspace's change.
  const live = useLiveChanges(tenantSlug, ["job", "workspace"], [trpc.jobs.list.pathFilter()]);
  const jobs = useQuery(
    trpc.jobs.list.queryOptions(
      { tenantSlug, limit: LIMIT, ...(state ? { states: [state] } : {}) },
      {
        // The change stream refetches; without it, poll while any listed job has not finished.
        refetchInterval: (query) =>
          live !== "live" && query.state.data?.some((job) => UNFINISHED.has(job.state)) ? POLL_MS : false,
      },
    ),
  );
  const retry = useMutation(
    trpc.jobs.retry.mutationOptions({
      onSuccess: async () => {
        toast.success("Job queued again.");
        await queryClient.invalidateQueries({ queryKey: trpc.jobs.list.pathKey() });
      },
    }),
  );

  const columns: ColumnDef<JobRow, unknown>[] = [
    {
      id: "job",
      header: "Job",
      accessorFn: (job) => job.name,
      cell: ({ row: { original: job } }) => {
        const workspaceId = workspaceOf(job.data);
        return (
          <div>
            <code className="text-xs font-medium">{job.name}</code>
            <div className="text-muted-foreground text-xs">
              {workspaceId ? (
                <Link
                  className="font-mono hover:underline"
                  href={`${base}/workspaces/${encodeURIComponent(workspaceId)}`}
                >
                  {workspaceId}
                </Link>
              ) : (
                <span className="font-mono">{job.id}</span>
              )}
            </div>
          </div>
        );
      },
    },
    {
      id: "state",
      header: "State",
      accessorFn: (job) => job.state,
      cell: ({ row: { original: job } }) => <StateBadge state={job.state} data-testid="job-state" />,
    },
    {
      id: "attempts",
      header: "Attempts",
      accessorFn: (job) => job.attemptsMade,
      cell: ({ row: { original: job } }) => (
        <span className="tabular-nums">
          {job.attemptsMade} <span className="text-muted-foreground">of {job.attemptsMax}</span>
        </span>
      ),
    },
    {
      id: "failure",
      header: "Failure",
      accessorFn: (job) => job.failedReason ?? "",
      cell: ({ row: { original: job } }) =>
        job.failedReason ? (
          <details className="max-w-sm text-xs" data-testid="job-error">
            <summary className="text-destructive cursor-pointer break-words">
              {job.failedReason.length > 120 ? `${job.failedReason.slice(0, 120)}…` : job.failedReason}
            </summary>
            <pre className="bg-muted/40 mt-1 max-h-48 overflow-auto rounded border p-2 font-mono whitespace-pre-wrap">
              {job.failedReason}
            </pre>
          </details>
        ) : (
          <span className="text-muted-foreground">—</span>
        ),
    },
    {
      id: "created",
      header: "Created",
      accessorFn: (job) => job.createdAt?.getTime() ?? 0,
      cell: ({ row: { original: job } }) => <RelativeTime value={job.createdAt} />,
    },
    {
      id: "finished",
      header: "Finished",
      accessorFn: (job) => job.finishedAt?.getTime() ?? 0,
      cell: ({ row: { original: job } }) => <RelativeTime value={job.finishedAt} />,
    },
    {
      id: "actions",
      header: () => <span className="sr-only">Actions</span>,
      enableSorting: false,
      cell: ({ row: { original: job } }) =>
        job.state === "failed" ? (
          <div className="flex justify-end">
            <Button
              variant="outline"
              size="sm"
              disabled={retry.isPending}
              onClick={() => retry.mutate({ tenantSlug, jobId: job.id })}
            >
              <RotateCcw /> Retry
            </Button>
          </div>
        ) : null,
    },
  ];

  return (
    <Card>
      {retry.error && (
        <div className="px-5 pt-4">
          <Alert>{retry.error.message}</Alert>
        </div>
      )}
      {jobs.error ? (
        <div className="p-5">
          <Alert>{jobs.error.message}</Alert>
        </div>
      ) : (
        <DataTable
          label="Jobs"
          columns={columns}
          data={jobs.data ?? []}
          loading={!jobs.data}
          rowTestId="job-row"
          toolbar={
            <>
              <LiveBadge status={live} />
              <div className="w-40">
                <Select
                  aria-label="State"
                  value={state}
                  onChange={(event) =>
                    setState(JOB_STATES.find((value) => value === event.target.value) ?? "")
                  }
                  className="[&_select]:h-8"
                >
                  <option value="">All states</option>
                  {JOB_STATES.map((value) => (
                    <option key={value} value={value}>
                      {value}
                    </option>
                  ))}
                </Select>
              </div>
              <Button
                variant="outline"
                size="sm"
                disabled={jobs.isFetching}
                onClick={() => void jobs.refetch()}
              >
                <RefreshCw className={jobs.isFetching ? "animate-spin" : undefined} /> Refresh
              </Button>
            </>
          }
          empty={
            <EmptyState
              icon={Activity}
              title={state ? `No ${state} jobs` : "No jobs"}
              description={`Finished jobs stay listed for ${RETENTION_TEXT}.`}
            />
          }
        />
      )}
    </Card>
  );
}
