import { TRPCError } from "@trpc/server";
import { type TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import { type AppErrorCode, isAppError } from "@/server/shared/errors";

/** AppError code → tRPC code. Exhaustive on purpose: a new AppError code must be mapped here. */
const TRPC_CODE_BY_APP_CODE = {
  BAD_REQUEST: "BAD_REQUEST",
  UNAUTHORIZED: "UNAUTHORIZED",
  FORBIDDEN: "FORBIDDEN",
  NOT_FOUND: "NOT_FOUND",
  CONFLICT: "CONFLICT",
  PAYLOAD_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  UNPROCESSABLE: "UNPROCESSABLE_CONTENT",
  TOO_MANY_REQUESTS: "TOO_MANY_REQUESTS",
  TIMEOUT: "GATEWAY_TIMEOUT",
  UNAVAILABLE: "SERVICE_UNAVAILABLE",
  INTERNAL: "INTERNAL_SERVER_ERROR",
} as const satisfies Record<AppErrorCode, TRPC_ERROR_CODE_KEY>;

/** The message every 5xx carries to the client; the real one stays in the server log. */
export const MASKED_ERROR_MESSAGE = "Internal error";

const SERVER_ERROR_CODES: ReadonlySet<TRPC_ERROR_CODE_KEY> = new Set([
  "INTERNAL_SERVER_ERROR",
  "NOT_IMPLEMENTED",
  "BAD_GATEWAY",
  "SERVICE_UNAVAILABLE",
  "GATEWAY_TIMEOUT",
]);

export function isServerErrorCode(code: TRPC_ERROR_CODE_KEY): boolean {
  return SERVER_ERROR_CODES.has(code);
}

/**
 * The one mapping from whatever a procedure threw to what a client may see:
 * - AppError → its tRPC code with its `userMessage` (4xx) or the masked message (5xx);
 * - TRPCError (thrown by tRPC itself, e.g. input validation) → kept, but 5xx messages are masked;
 * - anything else → INTERNAL_SERVER_ERROR with the masked message.
 * The original error is kept as `cause` so the server log shows what really happened.
 */
export function toClientSafeTRPCError(error: TRPCError): TRPCError {
  const original = error.cause;
  if (isAppError(original)) {
    const code = TRPC_CODE_BY_APP_CODE[original.code];
    const message = isServerErrorCode(code) ? MASKED_ERROR_MESSAGE : original.userMessage;
    return new TRPCError({ code, message, cause: original });
  }
  if (isServerErrorCode(error.code) && error.message !== MASKED_ERROR_MESSAGE) {
    return new TRPCError({ code: error.code, message: MASKED_ERROR_MESSAGE, cause: original ?? error });
  }
  return error;
}
