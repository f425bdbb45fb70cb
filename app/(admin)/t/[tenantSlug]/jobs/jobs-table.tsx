"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type ChangeEvent, useState } from "react";
import { useTRPC } from "@/app/_trpc/client";

const JOB_STATES = ["active", "waiting", "delayed", "completed", "failed"] as const;
type JobState = (typeof JOB_STATES)[number];

const STATE_TONE: Record<string, string> = {
  active: "warn",
  waiting: "warn",
  delayed: "warn",
  completed: "ok",
  failed: "error",
};
const UNFINISHED = new Set(["active", "waiting", "delayed", "waiting-children", "prioritized"]);
const POLL_MS = 1_000;
const LIMIT = 100;

const formatDate = (value: Date | null) => (value ? value.toLocaleString() : "—");

/** The workspace a job is about, when its payload names one (most of them do). */
function workspaceOf(data: unknown): string | null {
  const id = (data as { workspaceId?: unknown } | null)?.workspaceId;
  return typeof id === "string" ? id : null;
}

export function JobsTable({ tenantSlug }: { tenantSlug: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [state, setState] = useState<JobState | "">("");
  const listOptions = trpc.jobs.list.queryOptions(
    { tenantSlug, limit: LIMIT, ...(state ? { states: [state] } : {}) },
    {
      // Jobs run in workers: poll while any listed job has not finished, so a retry is seen to land.
      refetchInterval: (query) =>
        query.state.data?.some((job) => UNFINISHED.has(job.state)) ? POLL_MS : false,
    },
  );
  const jobs = useQuery(listOptions);
  const retry = useMutation(
    trpc.jobs.retry.mutationOptions({
      onSuccess: () => queryClient.invalidateQueries({ queryKey: trpc.jobs.list.pathKey() }),
    }),
  );

  return (
    <div className="panel">
      <div className="form-row" style={{ marginBottom: 12 }}>
        <label>
          State
          <select
            value={state}
            onChange={(event: ChangeEvent<HTMLSelectElement>) =>
              setState(event.target.value as JobState | "")
            }
          >
            <option value="">all</option>
            {JOB_STATES.map((value) => (
              <option key={value} value={value}>
                {value}
              </option>
            ))}
          </select>
        </label>
        <button
          type="button"
          className="secondary"
          disabled={jobs.isFetching}
          onClick={() => void jobs.refetch()}
        >
          Refresh
        </button>
      </div>
      {retry.error && (
        <div className="alert error" role="alert" style={{ marginBottom: 12 }}>
          {retry.error.message}
        </div>
      )}
      {jobs.error ? (
        <div className="alert error" role="alert">
          {jobs.error.message}
        </div>
      ) : !jobs.data ? (
        <p className="muted">Loading…</p>
      ) : jobs.data.length === 0 ? (
        <p className="muted">
          No jobs{state ? ` in state ${state}` : ""}. Completed jobs are kept for a while only.
        </p>
      ) : (
        <table className="data">
          <thead>
            <tr>
              <th>Job</th>
              <th>State</th>
              <th>Attempts</th>
              <th>Failure</th>
              <th>Created</th>
              <th>Finished</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {jobs.data.map((job) => (
              <tr key={`${job.queue}:${job.id}`} data-testid="job-row" data-job-id={job.id}>
                <td>
                  <div className="mono">{job.name}</div>
                  <div className="muted mono" style={{ fontSize: 12 }}>
                    {workspaceOf(job.data) ?? job.id}
                  </div>
                </td>
                <td>
                  <span className={`badge ${STATE_TONE[job.state] ?? ""}`} data-testid="job-state">
                    {job.state}
                  </span>
                </td>
                <td>{job.attemptsMade}</td>
                <td style={{ maxWidth: 360, wordBreak: "break-word" }}>{job.failedReason ?? "—"}</td>
                <td>{formatDate(job.createdAt)}</td>
                <td>{formatDate(job.finishedAt)}</td>
                <td>
                  {job.state === "failed" && (
                    <button
                      type="button"
                      className="secondary"
                      disabled={retry.isPending}
                      onClick={() => retry.mutate({ tenantSlug, jobId: job.id })}
                    >
                      Retry
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
