import { isAppError } from "@/server/shared/errors";
import { redactHostPaths } from "@/server/shared/host-paths";

const MAX_REASON_CHARS = 500;

/**
 * What a failed action's audit row says about the failure: its error code, and for a caller's error
 * (4xx) the message the caller was shown, host paths redacted, so the audit page gives the reason in
 * words. A server error (5xx) is recorded by code only: its message is internal.
 */
export function auditFailureDetails(error: unknown): { code: string; error?: string } {
  if (!isAppError(error)) return { code: "INTERNAL" };
  if (error.httpStatus >= 500) return { code: error.code };
  return { code: error.code, error: redactHostPaths(error.userMessage).slice(0, MAX_REASON_CHARS) };
}
