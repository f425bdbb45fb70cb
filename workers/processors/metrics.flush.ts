import type { Queue } from "bullmq";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import { flushStageSamples, type StageBufferDeps } from "@/server/modules/metrics/stage-buffer.service";
import type { DriverSet } from "@/server/engine/driver-set";
import { sampleWorkspaceResources } from "@/server/modules/metrics/resource-usage.service";
import { exportMetricsIfDue } from "@/server/modules/metrics/otlp-export.service";
import type { OtlpExportConfig } from "@/server/config/operations";
import type { JobProcessor } from "../registry";
import type { Db } from "@/server/db";

/**
 * `metrics.flush`: stage timings from the Redis buffer into Postgres, then the retention prune, then (when
 * an OTLP endpoint is configured and the interval is due) the figures to the OpenTelemetry collector. A
 * collector that fails is logged, never a failed flush: the timings are already safe in Postgres.
 */
export function metricsFlushProcessor(
  deps: StageBufferDeps & {
    db: Db;
    /** The queues whose job counts the OTLP export reports (the root's). */
    queues: readonly Queue[];
    retentionDays: number;
    otlp: OtlpExportConfig | null;
  },
): JobProcessor<BerthJobCatalog, "metrics.flush"> {
  const startedAt = new Date();
  return async ({ payload, log }) => {
    const result = await flushStageSamples({ retentionDays: deps.retentionDays }, deps, deps.db);
    if (result.written > 0 || result.pruned > 0 || result.unreadable > 0) {
      log.info({ ...result, trigger: payload.trigger }, "stage timings flushed");
    }
    const exported = await exportMetricsIfDue(deps.otlp, { ...deps, startedAt }).catch((error: unknown) => {
      log.warn({ err: error }, "OpenTelemetry export failed; retried at the next interval");
      return "failed" as const;
    });
    return { ...result, otlp: exported };
  };
}

/** `metrics.sample`: every READY workspace's CPU, memory, disk and processes from its backend. */
export function metricsSampleProcessor(deps: {
  db: Db;
  drivers: Pick<DriverSet, "forKind">;
  retentionDays: number;
}): JobProcessor<BerthJobCatalog, "metrics.sample"> {
  return async ({ log }) => {
    const result = await sampleWorkspaceResources({ ...deps, log }, deps.db);
    if (result.failed > 0) log.warn(result, "some workspaces' resources could not be sampled");
    return result;
  };
}
