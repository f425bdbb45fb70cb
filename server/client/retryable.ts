import { TRPCClientError } from "@trpc/client";

/**
 * Whether a failed call may be sent again unchanged after a pause: the server answered 503 UNAVAILABLE
 * (its database or Redis is unreachable for a moment), 504 or 429, and says so in `data.retryable`. A 4xx
 * (bad input, not found, forbidden, conflict) or a masked 500 is not worth retrying as it is.
 */
export function isRetryableError(error: unknown): boolean {
  if (!(error instanceof TRPCClientError)) return false;
  const data: unknown = error.data;
  if (typeof data !== "object" || data === null) return false;
  const { retryable, code } = data as { retryable?: unknown; code?: unknown };
  if (typeof retryable === "boolean") return retryable;
  return code === "SERVICE_UNAVAILABLE" || code === "GATEWAY_TIMEOUT" || code === "TOO_MANY_REQUESTS";
}
