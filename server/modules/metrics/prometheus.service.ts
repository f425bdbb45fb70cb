import { createHash, timingSafeEqual } from "node:crypto";
import type { Queue } from "bullmq";
import { getQueues } from "@/server/queue/queues";
import { AppError } from "@/server/shared/errors";
import { STAGE_BUCKETS_MS, stageHistograms, workspaceCounts } from "./metrics.data";

/**
 * `GET /api/metrics` in the Prometheus text format (0.0.4). Every name and label is listed in
 * server/modules/metrics/README.md. Stage figures cover the stored samples (the retention window,
 * BERTH_METRICS_RETENTION_DAYS), so they behave like counters that reset when old samples are pruned.
 */

/** Bearer-token check: constant time over digests, so neither the token nor its length leaks. */
export function assertMetricsToken(configured: string | null, authorization: string | null): void {
  if (configured === null)
    throw new AppError("NOT_FOUND", "metrics are disabled (BERTH_METRICS_TOKEN unset)");
  const presented = /^Bearer (.+)$/i.exec(authorization ?? "")?.[1] ?? "";
  const digest = (value: string) => createHash("sha256").update(value).digest();
  if (!timingSafeEqual(digest(presented), digest(configured))) {
    throw new AppError("UNAUTHORIZED", "a valid metrics bearer token is required");
  }
}

type Labels = Record<string, string>;

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(
    ([key, value]) => `${key}="${value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')}"`,
  );
  return parts.length > 0 ? `{${parts.join(",")}}` : "";
}

class Exposition {
  private readonly lines: string[] = [];
  family(name: string, type: "gauge" | "counter" | "histogram", help: string): this {
    this.lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    return this;
  }
  sample(name: string, labels: Labels, value: number): this {
    this.lines.push(`${name}${labelText(labels)} ${Number.isFinite(value) ? value : 0}`);
    return this;
  }
  text(): string {
    return `${this.lines.join("\n")}\n`;
  }
}

const JOB_STATES = ["waiting", "active", "delayed", "prioritized", "failed", "completed"] as const;

/** The exposition; `queues` defaults to the process' queues (tests pass their own). */
export async function renderMetrics(
  deps: { queues: readonly Queue[] } = { queues: getQueues().all() },
): Promise<string> {
  const out = new Exposition();
  out.family("berth_workspaces", "gauge", "Workspaces by state and backend.");
  for (const row of await workspaceCounts()) {
    out.sample("berth_workspaces", { state: row.state, backend: row.backend }, row.count);
  }

  const histograms = await stageHistograms();
  out.family(
    "berth_provisions_total",
    "counter",
    "Provision jobs by backend, path and outcome (stored samples).",
  );
  out.family("berth_turns_total", "counter", "Chat turns by backend and outcome (stored samples).");
  for (const row of histograms) {
    const outcome = row.ok ? "ok" : "failed";
    if (row.kind === "provision" && row.stage === "total") {
      out.sample("berth_provisions_total", { backend: row.backend, path: row.path, outcome }, row.count);
    }
    if (row.kind === "turn" && row.stage === "model") {
      out.sample("berth_turns_total", { backend: row.backend, outcome }, row.count);
    }
  }
  out.family(
    "berth_stage_duration_seconds",
    "histogram",
    "Duration of each stage of provisions, attaches and turns, by kind, backend, path, stage and outcome.",
  );
  for (const row of histograms) {
    const labels = {
      kind: row.kind,
      backend: row.backend,
      path: row.path,
      stage: row.stage,
      outcome: row.ok ? "ok" : "failed",
    };
    STAGE_BUCKETS_MS.forEach((bound, index) => {
      out.sample(
        "berth_stage_duration_seconds_bucket",
        { ...labels, le: String(bound / 1000) },
        row.buckets[index]!,
      );
    });
    out.sample("berth_stage_duration_seconds_bucket", { ...labels, le: "+Inf" }, row.count);
    out.sample("berth_stage_duration_seconds_sum", labels, row.sumMs / 1000);
    out.sample("berth_stage_duration_seconds_count", labels, row.count);
  }

  out.family("berth_jobs", "gauge", "BullMQ jobs by queue and state (waiting + prioritized = queue depth).");
  out.family("berth_queue_depth", "gauge", "Jobs waiting to be picked up, by queue.");
  for (const queue of deps.queues) {
    const counts = await queue.getJobCounts(...JOB_STATES);
    for (const state of JOB_STATES)
      out.sample("berth_jobs", { queue: queue.name, state }, counts[state] ?? 0);
    out.sample("berth_queue_depth", { queue: queue.name }, (counts.waiting ?? 0) + (counts.prioritized ?? 0));
  }
  return out.text();
}
