import { createHash, timingSafeEqual } from "node:crypto";
import type { Queue } from "bullmq";
import { AppError } from "@/server/shared/errors";
import { type Labels, metricsSnapshot } from "./metrics-snapshot";
import type { Db } from "@/server/db";

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

/** The exposition, with the job counts of `deps.queues` (the root's). */
export async function renderMetrics(db: Db, deps: { queues: readonly Queue[] }): Promise<string> {
  const out = new Exposition();
  for (const family of await metricsSnapshot(deps, db)) {
    out.family(family.name, family.type, family.help);
    if (family.type !== "histogram") {
      for (const point of family.points) out.sample(family.name, point.labels, point.value);
      continue;
    }
    for (const point of family.points) {
      point.bounds.forEach((bound, index) => {
        out.sample(`${family.name}_bucket`, { ...point.labels, le: String(bound) }, point.cumulative[index]!);
      });
      out.sample(`${family.name}_bucket`, { ...point.labels, le: "+Inf" }, point.count);
      out.sample(`${family.name}_sum`, point.labels, point.sum);
      out.sample(`${family.name}_count`, point.labels, point.count);
    }
  }
  return out.text();
}
