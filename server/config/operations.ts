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
});

export type OperationsConfig = {
  readonly metricsToken: string | null;
  readonly metricsRetentionDays: number;
  readonly webhookAllowedOrigins: readonly string[];
};

export function loadOperationsConfig(env: RawEnv = readProcessEnv()): OperationsConfig {
  const parsed = parseEnv(ZOperationsEnv, env, "operations");
  return {
    metricsToken: parsed.BERTH_METRICS_TOKEN ?? null,
    metricsRetentionDays: parsed.BERTH_METRICS_RETENTION_DAYS,
    webhookAllowedOrigins: parsed.BERTH_WEBHOOK_ALLOWED_ORIGINS.map((origin) => new URL(origin).origin),
  };
}
