import { z } from "zod";
import { parseEnv, readProcessEnv, type RawEnv } from "./env";

const commaList = z
  .string()
  .default("")
  .transform((value) =>
    value
      .split(",")
      .map((entry) => entry.trim())
      .filter((entry) => entry.length > 0),
  );

const ZOperationsEnv = z.object({
  // Bearer token Prometheus sends to GET /api/metrics. Unset → the endpoint answers 404 (nothing exposed).
  BERTH_METRICS_TOKEN: z.string().min(32, "at least 32 characters").optional(),
  // How long stage timings (the readiness picture) are kept.
  BERTH_METRICS_RETENTION_DAYS: z.coerce.number().int().min(1).max(3_650).default(14),
  // Exact origins (`http://127.0.0.1:4567`) a webhook endpoint may have although they are plain http or
  // private: the operator's own receivers. Every other endpoint must be https on a public address.
  BERTH_WEBHOOK_ALLOWED_ORIGINS: commaList.pipe(z.array(z.url({ protocol: /^https?$/ }))),
  // OpenTelemetry export of the same figures (the standard OTEL_* variables; unset → no export).
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  OTEL_EXPORTER_OTLP_HEADERS: z.string().optional(),
  OTEL_EXPORTER_OTLP_METRICS_HEADERS: z.string().optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: z
    .literal("http/json", { error: "Berth exports OTLP as http/json only (not grpc or http/protobuf)" })
    .optional(),
  OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: z
    .literal("http/json", { error: "Berth exports OTLP as http/json only (not grpc or http/protobuf)" })
    .optional(),
  OTEL_METRIC_EXPORT_INTERVAL: z.coerce.number().int().min(5_000).max(86_400_000).default(60_000),
  OTEL_SERVICE_NAME: z.string().min(1).default("berth"),
});

/** Where and how often the workers push the figures to an OpenTelemetry collector. */
export type OtlpExportConfig = {
  readonly metricsUrl: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly intervalMs: number;
  readonly serviceName: string;
};

/** `k1=v1,k2=v2` with percent-encoded values (the OTLP exporter specification's format). */
function otlpHeaders(raw: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of (raw ?? "").split(",")) {
    const at = pair.indexOf("=");
    if (at <= 0) continue;
    headers[pair.slice(0, at).trim().toLowerCase()] = decodeURIComponent(pair.slice(at + 1).trim());
  }
  return headers;
}

function otlpExportConfig(parsed: z.output<typeof ZOperationsEnv>): OtlpExportConfig | null {
  // The signal-specific URL is used as given; the base endpoint gets the metrics path appended.
  const metricsUrl =
    parsed.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT ??
    (parsed.OTEL_EXPORTER_OTLP_ENDPOINT
      ? `${parsed.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, "")}/v1/metrics`
      : null);
  if (!metricsUrl) return null;
  return {
    metricsUrl,
    headers: {
      ...otlpHeaders(parsed.OTEL_EXPORTER_OTLP_HEADERS),
      ...otlpHeaders(parsed.OTEL_EXPORTER_OTLP_METRICS_HEADERS),
    },
    intervalMs: parsed.OTEL_METRIC_EXPORT_INTERVAL,
    serviceName: parsed.OTEL_SERVICE_NAME,
  };
}

export type OperationsConfig = {
  readonly metricsToken: string | null;
  readonly metricsRetentionDays: number;
  readonly webhookAllowedOrigins: readonly string[];
  /** Null when no OTLP endpoint is configured. */
  readonly otlp: OtlpExportConfig | null;
};

export function loadOperationsConfig(env: RawEnv = readProcessEnv()): OperationsConfig {
  const parsed = parseEnv(ZOperationsEnv, env, "operations");
  return {
    metricsToken: parsed.BERTH_METRICS_TOKEN ?? null,
    metricsRetentionDays: parsed.BERTH_METRICS_RETENTION_DAYS,
    webhookAllowedOrigins: parsed.BERTH_WEBHOOK_ALLOWED_ORIGINS.map((origin) => new URL(origin).origin),
    otlp: otlpExportConfig(parsed),
  };
}
