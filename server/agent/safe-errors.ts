import { type AppError, isAppError, toAppError } from "@/server/shared/errors";
import { redactHostPaths } from "@/server/shared/host-paths";
import type { TChatTurnEvent } from "./agent.schema";

/**
 * What a chat client may read of an error (stream `error` events, tool results): never an internal cause.
 * A 4xx says what its user message says. A 5xx keeps a user message only when one was written for users
 * (it differs from the internal message: an AppError built without one repeats its message, which may
 * quote the database); anything else that is not an AppError (a Prisma error, a socket error) is
 * "Internal error". Host paths are redacted either way.
 */
export function safeErrorMessage(error: AppError): string {
  if (error.httpStatus < 500) return redactHostPaths(error.userMessage);
  const written = error.userMessage !== error.message && !looksInternal(error.userMessage);
  return written ? redactHostPaths(error.userMessage) : "Internal error";
}

/** The `error` event for anything thrown: typed code, safe message. */
export function safeErrorEvent(thrown: unknown): Extract<TChatTurnEvent, { type: "error" }> {
  const error = toAppError(thrown);
  return { type: "error", code: error.code, message: safeErrorMessage(error), retryable: error.isRetryable };
}

/** A thrown tool error as the model (and the client's tool-result) sees it. */
export function safeThrownText(thrown: unknown): string {
  if (isAppError(thrown)) return safeErrorMessage(thrown);
  const message = thrown instanceof Error ? thrown.message : String(thrown);
  const name = thrown instanceof Error ? thrown.name : "";
  return looksInternal(`${name}: ${message}`) ? "Internal error" : redactHostPaths(message);
}

// Texts of Berth's own infrastructure (Prisma, the database driver) are never shown.
function looksInternal(text: string): boolean {
  return /Prisma|DriverAdapterError|Can't reach database server|Invalid `[^`]*` invocation/i.test(text);
}
