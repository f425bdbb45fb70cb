import type { Queue } from "bullmq";
import type { Redis } from "ioredis";
import type { OtlpExportConfig } from "@/server/config/operations";
import { redisKey } from "@/server/redis";
import { metricsSnapshot } from "./metrics-snapshot";
import { otlpMetricsRequest, sendOtlpMetrics } from "./otlp-export";
import type { Db } from "@/server/db";

export type OtlpExportDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  redis: Redis;
  redisPrefix: string;
  /** Who started the cumulative figures (this process' first export) and what it is. */
  startedAt: Date;
  resource?: Record<string, string>;
  /** The queues whose counts are exported (the root's). */
  queues: readonly Queue[];
};

/**
 * One export per interval for the whole installation, whichever worker's flush tick comes first: the
 * figures are installation-wide (Postgres and the queues), so two workers exporting would only double
 * the collector's points. The claim is a Redis key that expires with the interval; a failed export keeps
 * it, so a collector that is down is retried at the next interval, not at every 5 s tick.
 */
export async function exportMetricsIfDue(
  config: OtlpExportConfig | null,
  deps: OtlpExportDeps,
  now: () => Date = () => new Date(),
): Promise<"exported" | "not-due" | "disabled"> {
  if (!config) return "disabled";
  const claim = await deps.redis.set(
    redisKey(deps.redisPrefix, "metrics", "otlp-export"),
    String(process.pid),
    "PX",
    config.intervalMs,
    "NX",
  );
  if (claim !== "OK") return "not-due";
  const body = otlpMetricsRequest(await metricsSnapshot({ queues: deps.queues }, deps.db), {
    serviceName: config.serviceName,
    startedAt: deps.startedAt,
    now: now(),
    ...(deps.resource ? { resource: deps.resource } : {}),
  });
  await sendOtlpMetrics(config, body);
  return "exported";
}
