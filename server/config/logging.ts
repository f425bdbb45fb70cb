import { z } from "zod";
import { parseEnv, readProcessEnv, type RawEnv } from "./env";

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

const ZLoggingEnv = z.object({
  LOG_LEVEL: z.enum(LOG_LEVELS).optional(),
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
});

export type LoggingConfig = { readonly level: (typeof LOG_LEVELS)[number] };

export function loadLoggingConfig(env: RawEnv = readProcessEnv()): LoggingConfig {
  const parsed = parseEnv(ZLoggingEnv, env, "logging");
  // Tests stay quiet unless asked: their output is the reporter's, not ours.
  return { level: parsed.LOG_LEVEL ?? (parsed.NODE_ENV === "test" ? "warn" : "info") };
}
