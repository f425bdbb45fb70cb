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
  TIMEOUT: { http: 504, retryable: true },
  UNAVAILABLE: { http: 503, retryable: true },
  INTERNAL: { http: 500, retryable: true },
} as const satisfies Record<string, { http: number; retryable: boolean }>;

export type AppErrorCode = keyof typeof APP_ERROR_CODES;

export class AppError extends Error {
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

export function isAppError(value: unknown): value is AppError {
  return value instanceof AppError;
}

/** Wraps anything thrown into an AppError, keeping AppErrors as they are. */
export function toAppError(value: unknown): AppError {
  if (value instanceof AppError) return value;
  const message = value instanceof Error ? value.message : String(value);
  return new AppError("INTERNAL", message, { cause: value, userMessage: "Internal error" });
}

/**
 * What a client may be shown for an error outside a transport's mapping (chat stream events, tool
 * results): the user message of a 4xx, a fixed text for a 5xx (whose message may quote the database).
 */
export function clientFacingMessage(error: AppError): string {
  return error.httpStatus >= 500 ? "Internal error" : error.userMessage;
}
