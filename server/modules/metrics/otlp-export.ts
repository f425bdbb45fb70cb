import os from "node:os";
import { AppError } from "@/server/shared/errors";
import type { OtlpExportConfig } from "@/server/config/operations";
import type { HistogramPoint, Labels, MetricFamily } from "./metrics-snapshot";

/**
 * OpenTelemetry export of the same figures `/api/metrics` serves, as OTLP/HTTP with the JSON encoding
 * (ExportMetricsServiceRequest, opentelemetry-proto's metrics/v1). Written against the protocol rather
 * than the OpenTelemetry JS SDK: the SDK's 3.x line needs Node 22, and its 2.x line requires an
 * `@opentelemetry/api` older than the one `ai` and better-auth already bring (see the metrics README).
 *
 * Names are the Prometheus ones, except that counters drop `_total`: an OTLP → Prometheus translation
 * (the collector's prometheus exporter, Prometheus' own OTLP receiver) adds it back to monotonic sums.
 * Every figure is cumulative (temporality 2) from `startTimeUnixNano`, this process' first export.
 */

const CUMULATIVE = 2;
const EXPORT_TIMEOUT_MS = 10_000;

type KeyValue = { key: string; value: { stringValue: string } };

const attributes = (labels: Labels): KeyValue[] =>
  Object.entries(labels).map(([key, value]) => ({ key, value: { stringValue: value } }));

/** Prometheus' cumulative `le` buckets → OTLP's count per bucket, with the overflow bucket last. */
function bucketCounts(point: HistogramPoint): string[] {
  const counts = point.cumulative.map(
    (value, index) => value - (index > 0 ? point.cumulative[index - 1]! : 0),
  );
  counts.push(point.count - (point.cumulative.at(-1) ?? 0));
  return counts.map(String);
}

/** The request body: one resource (this installation's process), one scope, every family. */
export function otlpMetricsRequest(
  families: readonly MetricFamily[],
  context: { serviceName: string; startedAt: Date; now: Date; resource?: Labels },
) {
  const startTimeUnixNano = String(BigInt(context.startedAt.getTime()) * 1_000_000n);
  const timeUnixNano = String(BigInt(context.now.getTime()) * 1_000_000n);
  const metrics = families.map((family) => {
    const base = {
      name: family.name,
      description: family.help,
      ...(family.unit ? { unit: family.unit } : {}),
    };
    if (family.type === "histogram") {
      return {
        ...base,
        histogram: {
          aggregationTemporality: CUMULATIVE,
          dataPoints: family.points.map((point) => ({
            attributes: attributes(point.labels),
            startTimeUnixNano,
            timeUnixNano,
            count: String(point.count),
            sum: point.sum,
            bucketCounts: bucketCounts(point),
            explicitBounds: [...point.bounds],
          })),
        },
      };
    }
    const dataPoints = family.points.map((point) => ({
      attributes: attributes(point.labels),
      ...(family.type === "counter" ? { startTimeUnixNano } : {}),
      timeUnixNano,
      asDouble: Number.isFinite(point.value) ? point.value : 0,
    }));
    return family.type === "counter"
      ? {
          ...base,
          name: family.name.replace(/_total$/, ""),
          sum: { aggregationTemporality: CUMULATIVE, isMonotonic: true, dataPoints },
        }
      : { ...base, gauge: { dataPoints } };
  });
  return {
    resourceMetrics: [
      {
        resource: {
          attributes: attributes({
            "service.name": context.serviceName,
            "host.name": os.hostname(),
            ...context.resource,
          }),
        },
        scopeMetrics: [{ scope: { name: "berth" }, metrics }],
      },
    ],
  };
}

/** POSTs one export; a refusal or an unreachable collector is UNAVAILABLE (the caller logs it and goes on). */
export async function sendOtlpMetrics(config: OtlpExportConfig, body: unknown): Promise<void> {
  let response: Response;
  try {
    response = await fetch(config.metricsUrl, {
      method: "POST",
      headers: { ...config.headers, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(EXPORT_TIMEOUT_MS),
    });
  } catch (error) {
    throw new AppError("UNAVAILABLE", `OTLP collector unreachable at ${config.metricsUrl}`, { cause: error });
  }
  // The collector's answer (an ExportMetricsServiceResponse, or an error Status) is read and dropped.
  const answer = await response.text().catch(() => "");
  if (!response.ok) {
    throw new AppError(
      "UNAVAILABLE",
      `OTLP collector at ${config.metricsUrl} answered ${response.status}: ${answer.slice(0, 200)}`,
    );
  }
}
