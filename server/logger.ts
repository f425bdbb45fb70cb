import { pino, type Logger } from "pino";
import type { LoggingConfig } from "@/server/config/logging";
import { processRoot } from "@/server/shared/process-root";

export type { Logger } from "pino";

/**
 * Keys whose values never reach a log line, at the top level and one or two levels down (pino's redact
 * paths do not support deep wildcards, so the common nesting depths are listed explicitly).
 */
const SECRET_KEYS = [
  "password",
  "passwordHash",
  "secret",
  "token",
  "accessToken",
  "refreshToken",
  "apiKey",
  "key",
  "authorization",
  "cookie",
  "set-cookie",
  "encryptionKey",
  "authSecret",
  "connectionString",
  "databaseUrl",
  "redisUrl",
  // The checkpoint bucket's static credentials (engine config `checkpointS3.credentials`).
  "secretAccessKey",
];
export const REDACT_PATHS = SECRET_KEYS.flatMap((key) => [
  `["${key}"]`,
  `*["${key}"]`,
  `*.*["${key}"]`,
  `req.headers["${key}"]`,
]);

/** Binds the ids that let one request or job be followed across log lines. */
export type LogContext = {
  requestId?: string;
  tenantId?: string;
  userId?: string;
  jobId?: string;
  jobName?: string;
  [key: string]: unknown;
};

export function createLogger(config: LoggingConfig, options: { name?: string } = {}): Logger {
  return pino({
    name: options.name ?? "berth",
    level: config.level,
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    // Stack traces and AppError codes/details, not just `message`.
    serializers: { err: pino.stdSerializers.errWithCause, error: pino.stdSerializers.errWithCause },
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}

/** A child logger carrying request/tenant/job ids. Never bind payloads that may hold secrets. */
export function withContext(log: Logger, context: LogContext): Logger {
  return log.child(context);
}

/** The process root's logger, for tests and bench/ only: server code is handed the root's (or a child). */
export function getLogger(): Logger {
  return processRoot<{ log: Logger }>().log;
}
