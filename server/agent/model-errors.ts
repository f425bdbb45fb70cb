import { APICallError, RetryError } from "ai";
import { AppError, isAppError } from "@/server/shared/errors";

/**
 * Maps what the AI SDK throws or streams (APICallError, RetryError, network failures) to the one AppError
 * the chat service reports. Provider responses are summarised, never copied: a provider body may echo
 * request details, and the request carried the agent's API key in a header.
 */
export function toModelAppError(error: unknown): AppError {
  if (isAppError(error)) return error;
  if (RetryError.isInstance(error)) {
    const mapped = toModelAppError(error.lastError);
    return new AppError(mapped.code, `${mapped.message} (after ${error.errors.length} attempts)`, {
      userMessage: mapped.userMessage,
      cause: error,
      details: { ...mapped.details, attempts: error.errors.length },
    });
  }
  if (APICallError.isInstance(error)) return fromApiCallError(error);
  if (isNetworkError(error)) {
    return new AppError("UNAVAILABLE", `Model endpoint unreachable: ${describe(error)}`, {
      userMessage: "The model provider could not be reached. Check the agent's base URL or try again later.",
      cause: error,
    });
  }
  return new AppError("INTERNAL", `Model call failed: ${describe(error)}`, {
    userMessage: "The model call failed unexpectedly.",
    cause: error,
  });
}

function fromApiCallError(error: APICallError): AppError {
  const status = error.statusCode;
  const details = { providerStatus: status ?? null };
  const providerMessage = error.message.slice(0, 300);
  if (status === 401 || status === 403) {
    return new AppError("UNPROCESSABLE", `Model provider rejected the credentials (HTTP ${status})`, {
      userMessage: `The model provider rejected the agent's API key (HTTP ${status}). Check the agent's model settings.`,
      cause: error,
      details,
    });
  }
  if (status === 404) {
    return new AppError("UNPROCESSABLE", `Model or endpoint not found (HTTP 404): ${providerMessage}`, {
      userMessage:
        "The model provider does not know this model or endpoint. Check the agent's model settings.",
      cause: error,
      details,
    });
  }
  if (status === 429) {
    return new AppError("TOO_MANY_REQUESTS", `Model provider rate limit: ${providerMessage}`, {
      userMessage: "The model provider is rate limiting requests. Try again shortly.",
      cause: error,
      details,
    });
  }
  if (status === 408 || status === 504) {
    return new AppError("TIMEOUT", `Model provider timed out (HTTP ${status})`, {
      userMessage: "The model provider timed out. Try again.",
      cause: error,
      details,
    });
  }
  if (status !== undefined && status >= 500) {
    return new AppError("UNAVAILABLE", `Model provider error (HTTP ${status}): ${providerMessage}`, {
      userMessage: `The model provider failed (HTTP ${status}). Try again later.`,
      cause: error,
      details,
    });
  }
  if (status !== undefined && status >= 400) {
    return new AppError(
      "UNPROCESSABLE",
      `Model provider refused the request (HTTP ${status}): ${providerMessage}`,
      {
        userMessage: `The model provider refused the request (HTTP ${status}): ${providerMessage}`,
        cause: error,
        details,
      },
    );
  }
  if (isNetworkError(error.cause)) {
    return new AppError("UNAVAILABLE", `Model endpoint unreachable: ${describe(error.cause)}`, {
      userMessage: "The model provider could not be reached. Check the agent's base URL or try again later.",
      cause: error,
    });
  }
  return new AppError("UNAVAILABLE", `Model call failed: ${providerMessage}`, {
    userMessage: "The model call failed. Try again later.",
    cause: error,
    details,
  });
}

const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "EPIPE"]);

function isNetworkError(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    const code = (current as Error & { code?: unknown }).code;
    if (typeof code === "string" && NETWORK_CODES.has(code)) return true;
    if (current instanceof TypeError && current.message === "fetch failed") return true;
    current = current.cause;
  }
  return false;
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
