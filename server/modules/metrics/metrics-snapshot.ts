import type { Queue } from "bullmq";
import { STAGE_BUCKETS_MS, stageHistograms, warmMachineCounts, workspaceCounts } from "./metrics.data";
import type { Db } from "@/server/db";

/**
 * The installation's figures at one moment, independent of how they are sent: `/api/metrics` renders them
 * as Prometheus text, the OTLP exporter as OpenTelemetry metrics. Every name and label is listed in
 * server/modules/metrics/README.md.
 */
export type Labels = Record<string, string>;
type ValuePoint = { labels: Labels; value: number };
export type HistogramPoint = {
  labels: Labels;
  /** Upper bounds in seconds, ascending (no +Inf). */
  bounds: readonly number[];
  /** Cumulative counts, one per bound (Prometheus' `le` buckets). */
  cumulative: readonly number[];
  count: number;
  sum: number;
};
export type MetricFamily =
  | { name: string; type: "gauge" | "counter"; help: string; unit?: string; points: ValuePoint[] }
  | { name: string; type: "histogram"; help: string; unit: string; points: HistogramPoint[] };

const JOB_STATES = ["waiting", "active", "delayed", "prioritized", "failed", "completed"] as const;
const BOUNDS_SECONDS = STAGE_BUCKETS_MS.map((bound) => bound / 1000);

/** The figures, with the job counts of `queues` (the root's: `berth.queues.all()`). */
export async function metricsSnapshot(deps: { queues: readonly Queue[] }, db: Db): Promise<MetricFamily[]> {
  const workspaces = (await workspaceCounts(db)).map((row) => ({
    labels: { state: row.state, backend: row.backend },
    value: row.count,
  }));

  const pools = (await warmMachineCounts(db)).map((row) => ({
    labels: { backend: row.backendKind, state: row.state.toLowerCase() },
    value: row.count,
  }));

  const histograms = await stageHistograms(db);
  const provisions: ValuePoint[] = [];
  const turns: ValuePoint[] = [];
  const stages: HistogramPoint[] = [];
  for (const row of histograms) {
    const outcome = row.ok ? "ok" : "failed";
    if (row.kind === "provision" && row.stage === "total") {
      provisions.push({ labels: { backend: row.backend, path: row.path, outcome }, value: row.count });
    }
    if (row.kind === "turn" && row.stage === "model") {
      turns.push({ labels: { backend: row.backend, outcome }, value: row.count });
    }
    stages.push({
      labels: { kind: row.kind, backend: row.backend, path: row.path, stage: row.stage, outcome },
      bounds: BOUNDS_SECONDS,
      cumulative: row.buckets,
      count: row.count,
      sum: row.sumMs / 1000,
    });
  }

  const jobs: ValuePoint[] = [];
  const depth: ValuePoint[] = [];
  for (const queue of deps.queues) {
    const counts = await queue.getJobCounts(...JOB_STATES);
    for (const state of JOB_STATES)
      jobs.push({ labels: { queue: queue.name, state }, value: counts[state] ?? 0 });
    depth.push({ labels: { queue: queue.name }, value: (counts.waiting ?? 0) + (counts.prioritized ?? 0) });
  }

  return [
    { name: "berth_workspaces", type: "gauge", help: "Workspaces by state and backend.", points: workspaces },
    {
      name: "berth_provisions_total",
      type: "counter",
      help: "Provision jobs by backend, path and outcome (stored samples).",
      points: provisions,
    },
    {
      name: "berth_turns_total",
      type: "counter",
      help: "Chat turns by backend and outcome (stored samples).",
      points: turns,
    },
    {
      name: "berth_stage_duration_seconds",
      type: "histogram",
      unit: "s",
      help: "Duration of each stage of provisions, attaches and turns, by kind, backend, path, stage and outcome.",
      points: stages,
    },
    {
      name: "berth_warm_pool_machines",
      type: "gauge",
      help: "Warm pool machines by backend and state (creating, idle, claimed); hits and misses are berth_provisions_total's warm and pool_miss paths.",
      points: pools,
    },
    {
      name: "berth_jobs",
      type: "gauge",
      help: "BullMQ jobs by queue and state (waiting + prioritized = queue depth).",
      points: jobs,
    },
    {
      name: "berth_queue_depth",
      type: "gauge",
      help: "Jobs waiting to be picked up, by queue.",
      points: depth,
    },
  ];
}
