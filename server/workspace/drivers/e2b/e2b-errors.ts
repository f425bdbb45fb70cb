import {
  AuthenticationError,
  FileNotFoundError,
  InvalidArgumentError,
  NotEnoughSpaceError,
  NotFoundError,
  RateLimitError,
  SandboxError,
  ServiceBusyError,
  TimeoutError,
} from "e2b";
import { AppError, isAppError, type AppErrorCode } from "@/server/shared/errors";

/**
 * The one place SDK errors become AppErrors. A rejected API key is a configuration fault (INTERNAL, with a
 * message saying so); a sandbox that is gone or unreachable is UNAVAILABLE (the manager re-provisions);
 * file errors keep their meaning (NOT_FOUND, BAD_REQUEST).
 */
export function toAppError(error: unknown, action: string, details: Record<string, unknown> = {}): AppError {
  if (isAppError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  const make = (code: AppErrorCode, userMessage?: string) =>
    new AppError(code, `E2B ${action}: ${message}`, {
      cause: error,
      details: { ...details, e2bError: error instanceof Error ? error.name : typeof error },
      ...(userMessage ? { userMessage } : {}),
    });
  if (error instanceof AuthenticationError) {
    return make(
      "INTERNAL",
      "E2B rejected the API key (the tenant's own, set in Settings, or else the installation's E2B_API_KEY)",
    );
  }
  if (error instanceof FileNotFoundError) return make("NOT_FOUND");
  if (error instanceof InvalidArgumentError) return make("BAD_REQUEST");
  if (error instanceof RateLimitError) return make("TOO_MANY_REQUESTS", "E2B is rate limiting requests");
  if (error instanceof ServiceBusyError) return make("UNAVAILABLE", "E2B is busy, try again");
  if (error instanceof NotEnoughSpaceError)
    return make("UNPROCESSABLE", "The workspace sandbox is out of disk space");
  if (error instanceof NotFoundError) return make("UNAVAILABLE", "The workspace sandbox no longer exists");
  if (error instanceof TimeoutError) return make("UNAVAILABLE", "The workspace sandbox is not reachable");
  if (error instanceof SandboxError) return make("UNAVAILABLE", "The workspace sandbox is not reachable");
  return make("UNAVAILABLE", "E2B is not reachable");
}

/** Whether an SDK error says the sandbox itself does not exist (killed, expired, never was). */
export function isSandboxGone(error: unknown): boolean {
  return error instanceof NotFoundError && !(error instanceof FileNotFoundError);
}
