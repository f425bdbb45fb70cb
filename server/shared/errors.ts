/**
 * The one error type of Berth. Domain and engine code throw it; each transport maps it exactly once
 * (tRPC in server/api/trpc.ts, workers in workers/registry.ts, MCP tools in their result mapper).
 * `message` is internal (logged); `userMessage` is safe to show to a caller.
 */
export const APP_ERROR_CODES = {
  BAD_REQUEST: { http: 400, retryable: false },
  UNAUTHORIZED: { http: 401, retryable: false },
  FORBIDDEN: { http: 403, retryable: false },
  NOT_FOUND: { http: 404, retryable: false },
  CONFLICT: { http: 409, retryable: false },
  PAYLOAD_TOO_LARGE: { http: 413, retryable: false },
  UNPROCESSABLE: { http: 422, retryable: false },
  TOO_MANY_REQUESTS: { http: 429, retryable: true },
  /** A tenant quota or budget refused the request; `details` names the limit and its value. */
  QUOTA_EXCEEDED: { http: 429, retryable: false },
  /** Something Berth relays to (a workspace's preview port) refused or broke the connection. */
  BAD_GATEWAY: { http: 502, retryable: true },
  TIMEOUT: { http: 504, retryable: true },
  UNAVAILABLE: { http: 503, retryable: true },
  INTERNAL: { http: 500, retryable: true },
} as const satisfies Record<string, { http: number; retryable: boolean }>;

export type AppErrorCode = keyof typeof APP_ERROR_CODES;

/**
 * Marks every AppError, whichever copy of this module created it. A process can hold two copies (under
 * `npm start` the tsx-loaded composition and Next's bundle each have one), and a class is only `instanceof`
 * its own copy; `Symbol.for` gives both copies the same key.
 */
const APP_ERROR_BRAND: unique symbol = Symbol.for("berth.AppError");

export class AppError extends Error {
  /** `isAppError(error)` holds for AppErrors of any copy of this module (see APP_ERROR_BRAND). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // Only for AppError itself: a subclass keeps ordinary prototype-chain semantics.
    return this === AppError ? isAppError(value) : Function.prototype[Symbol.hasInstance].call(this, value);
  }

  readonly [APP_ERROR_BRAND] = true;
  override readonly name = "AppError";
  readonly code: AppErrorCode;
  readonly userMessage: string;
  /** Structured, non-secret facts for logs and API clients (e.g. `{ limit: 500 }`). */
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(
    code: AppErrorCode,
    message: string,
    options: { userMessage?: string; cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super(message, { cause: options.cause });
    this.code = code;
    this.userMessage = options.userMessage ?? message;
    this.details = options.details;
  }

  get httpStatus(): number {
    return APP_ERROR_CODES[this.code].http;
  }

  get isRetryable(): boolean {
    return APP_ERROR_CODES[this.code].retryable;
  }
}

/** True for an AppError from any copy of this module: the brand, and a code this copy knows. */
export function isAppError(value: unknown): value is AppError {
  if (typeof value !== "object" || value === null) return false;
  const candidate = value as { [APP_ERROR_BRAND]?: unknown; code?: unknown };
  return (
    candidate[APP_ERROR_BRAND] === true &&
    typeof candidate.code === "string" &&
    Object.hasOwn(APP_ERROR_CODES, candidate.code)
  );
}

/**
 * Wraps anything thrown into an AppError, keeping AppErrors as they are. A lost connection to PostgreSQL or
 * Redis (see isConnectionError) is UNAVAILABLE: retryable, a 503, never a 500 that reads like a bug.
 */
export function toAppError(value: unknown): AppError {
  if (isAppError(value)) return value;
  const message = value instanceof Error ? value.message : String(value);
  if (isConnectionError(value)) {
    return new AppError("UNAVAILABLE", message, {
      cause: value,
      userMessage: "A service Berth depends on is unavailable; retry shortly.",
    });
  }
  return new AppError("INTERNAL", message, { cause: value, userMessage: "Internal error" });
}

// Prisma: P1001 can't reach the server, P1002 timed out reaching it, P1008 operation timed out, P1017 the
// server closed the connection, P2024 no pool connection in time (the pool is waiting on a dead server).
const PRISMA_CONNECTION_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024"]);
// What the driver adapter (adapter-pg) reports under `meta.driverAdapterError.cause.kind`, raw queries too.
const ADAPTER_CONNECTION_KINDS = new Set([
  "DatabaseNotReachable",
  "ConnectionClosed",
  "SocketTimeout",
  "TooManyConnections",
]);
// PostgreSQL's SQLSTATEs for "this server cannot serve you right now", all transient: class 08 (connection
// exception); 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up, in
// recovery, shutting down), 57P05 idle_session_timeout (the server closed the connection); 53300
// too_many_connections (full for now: the adapter's TooManyConnections kind). Not 57P04 (database dropped)
// nor the rest of class 53 (disk full, out of memory): those need an operator, not a retry.
const POSTGRES_UNAVAILABLE_SQLSTATE = /^(08[0-9A-Z]{3}|57P0[1235]|53300)$/;
// Node socket errors.
const SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENOTCONN",
]);
const CONNECTION_MESSAGES =
  /Can't reach database server|Server has closed the connection|Connection terminated (unexpectedly|due to connection timeout)|timeout exceeded when trying to connect|Timed out fetching a new connection|Reached the max retries per request limit/i;

/**
 * True when `value` (or its cause, a few levels down) says a connection to the database or Redis failed,
 * not that the request or its data was wrong: Prisma's connection codes, the driver adapter's connection
 * kinds, pg's and Node's socket errors, ioredis giving up on a command. Duck-typed: this bottom layer
 * imports neither Prisma nor pg.
 */
export function isConnectionError(value: unknown, depth = 0): boolean {
  if (typeof value !== "object" || value === null || depth > 4) return false;
  const candidate = value as {
    code?: unknown;
    errorCode?: unknown;
    meta?: { driverAdapterError?: { cause?: { kind?: unknown; code?: unknown; originalCode?: unknown } } };
    message?: unknown;
    cause?: unknown;
  };
  const code = typeof candidate.code === "string" ? candidate.code : null;
  if (code !== null && (PRISMA_CONNECTION_CODES.has(code) || SOCKET_CODES.has(code))) return true;
  if (code !== null && POSTGRES_UNAVAILABLE_SQLSTATE.test(code)) return true;
  if (typeof candidate.errorCode === "string" && PRISMA_CONNECTION_CODES.has(candidate.errorCode))
    return true;
  const adapterCause = candidate.meta?.driverAdapterError?.cause;
  if (typeof adapterCause?.kind === "string" && ADAPTER_CONNECTION_KINDS.has(adapterCause.kind)) return true;
  // Any other server error reaches Prisma 7 as P2010/P2039 with the SQLSTATE only here (kind "postgres"):
  // e.g. a query while PostgreSQL restarts is P2039 { cause: { kind: "postgres", code: "57P03" } }.
  for (const sqlState of [adapterCause?.originalCode, adapterCause?.code]) {
    if (typeof sqlState === "string" && POSTGRES_UNAVAILABLE_SQLSTATE.test(sqlState)) return true;
  }
  if (typeof candidate.message === "string" && CONNECTION_MESSAGES.test(candidate.message)) return true;
  return isConnectionError(candidate.cause, depth + 1);
}

/**
 * What a client may be shown for an error outside a transport's mapping (chat stream events, tool
 * results): the user message of a 4xx, a fixed text for a 5xx (whose message may quote the database).
 */
export function clientFacingMessage(error: AppError): string {
  return error.httpStatus >= 500 ? "Internal error" : error.userMessage;
}
