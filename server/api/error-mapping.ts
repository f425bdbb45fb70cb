import { TRPCError } from "@trpc/server";
import { type TRPC_ERROR_CODE_KEY } from "@trpc/server/rpc";
import { ZodError } from "zod";
import { type AppErrorCode, isAppError, isConnectionError, toAppError } from "@/server/shared/errors";
import { redactHostPaths, redactHostPathsDeep } from "@/server/shared/host-paths";

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
  QUOTA_EXCEEDED: "TOO_MANY_REQUESTS",
  BAD_GATEWAY: "BAD_GATEWAY",
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

// The codes a client should retry as they are (after a pause): the request was fine, a dependency was not.
const RETRYABLE_CODES: ReadonlySet<TRPC_ERROR_CODE_KEY> = new Set([
  "TOO_MANY_REQUESTS",
  "SERVICE_UNAVAILABLE",
  "GATEWAY_TIMEOUT",
]);

/** Whether a client may retry the same call unchanged (sent to clients as `data.retryable`). */
export function isRetryableErrorCode(code: TRPC_ERROR_CODE_KEY): boolean {
  return RETRYABLE_CODES.has(code);
}

/**
 * The one mapping from whatever a procedure threw to what a client may see:
 * - AppError → its tRPC code with its `userMessage` (4xx) or the masked message (5xx); a lost database or
 *   Redis connection → SERVICE_UNAVAILABLE (503, retryable), masked like any 5xx;
 * - TRPCError (thrown by tRPC itself, e.g. input validation) → kept, but 5xx messages are masked;
 * - anything else → INTERNAL_SERVER_ERROR with the masked message.
 * The original error is kept as `cause` so the server log shows what really happened.
 */
export function toClientSafeTRPCError(error: TRPCError): TRPCError {
  // A lost database or Redis connection is UNAVAILABLE (retryable 503), not a masked 500.
  const original = isConnectionError(error.cause) ? toAppError(error.cause) : error.cause;
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

/**
 * The same mapping for plain route handlers: status and `{ error: { code, message, details?, fieldErrors? } }`,
 * 5xx masked, host paths redacted.
 */
export function toRouteError(error: unknown): {
  status: number;
  body: {
    error: {
      code: AppErrorCode;
      message: string;
      details?: Record<string, unknown>;
      fieldErrors?: Record<string, string[]>;
    };
  };
} {
  const appError = toAppError(error);
  const status = appError.httpStatus;
  if (status >= 500)
    return { status, body: { error: { code: appError.code, message: MASKED_ERROR_MESSAGE } } };
  const validation = appError.cause instanceof ZodError ? describeValidationError(appError.cause) : null;
  return {
    status,
    body: {
      error: {
        code: appError.code,
        message: redactHostPaths(validation ? validation.message : appError.userMessage),
        ...(appError.details ? { details: redactHostPathsDeep({ ...appError.details }) } : {}),
        ...(validation ? { fieldErrors: validation.fieldErrors } : {}),
      },
    },
  };
}

/** What a validation failure tells a client: one readable line plus the messages per field path. */
export type ValidationErrorView = {
  message: string;
  fieldErrors: Record<string, string[]>;
  issues: { path: string[]; message: string }[];
};

const MAX_LISTED_ISSUES = 10;

/**
 * Turns zod issues into `"name: must be at most 64 characters; temperature: expected a number"` and
 * `{ fieldErrors: { name: [...], temperature: [...] } }` (root-level issues under "(root)").
 */
export function describeValidationError(error: ZodError): ValidationErrorView {
  const issues = error.issues.map((issue) => ({
    path: issue.path.map(String),
    message: readableIssue(issue),
  }));
  const fieldErrors: Record<string, string[]> = {};
  for (const issue of issues) {
    const key = issue.path.length === 0 ? "(root)" : issue.path.join(".");
    (fieldErrors[key] ??= []).push(issue.message);
  }
  const parts = issues
    .slice(0, MAX_LISTED_ISSUES)
    .map((issue) => (issue.path.length === 0 ? issue.message : `${issue.path.join(".")}: ${issue.message}`));
  if (issues.length > MAX_LISTED_ISSUES) parts.push(`and ${issues.length - MAX_LISTED_ISSUES} more`);
  return { message: parts.join("; ") || "Invalid input", fieldErrors, issues };
}

type Issue = ZodError["issues"][number];

function readableIssue(issue: Issue): string {
  switch (issue.code) {
    case "invalid_type":
      // zod reports the input only on request; its message says what it received.
      return /received undefined$/.test(issue.message)
        ? "is required"
        : `expected ${article(issue.expected)}`;
    case "too_big":
      return bound("at most", issue.maximum, issue.origin, issue.inclusive);
    case "too_small":
      return bound("at least", issue.minimum, issue.origin, issue.inclusive);
    case "unrecognized_keys":
      return `unknown ${issue.keys.length === 1 ? "key" : "keys"} ${issue.keys.map((key) => `"${key}"`).join(", ")}`;
    case "invalid_value":
      return `must be one of ${issue.values.map((value) => JSON.stringify(value)).join(", ")}`;
    case "invalid_format":
      // A regex's message is the schema's own explanation ("letters, digits, …"); keep it.
      return issue.format === "regex" ? issue.message : `must be a valid ${issue.format}`;
    case "custom":
    case "invalid_element":
    case "invalid_key":
    case "invalid_union":
    case "not_multiple_of":
      // The schema's own message (refinements) or zod's, which is readable for these.
      return issue.message;
  }
}

function article(type: string): string {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

function bound(
  relation: "at most" | "at least",
  limit: number | bigint,
  origin: string,
  inclusive: boolean | undefined,
): string {
  const exclusive = inclusive === false;
  const limitText = String(limit);
  // "at least 1 characters" reads as a bug: a minimum of one is "not empty", and one thing is singular.
  const counted = (noun: string) => `${limitText} ${noun}${limitText === "1" ? "" : "s"}`;
  const collection = origin === "string" || origin === "array" || origin === "set" || origin === "object";
  if (collection && relation === "at least" && limitText === "1") return "must not be empty";
  switch (origin) {
    case "string":
      return `must be ${relation} ${counted("character")}`;
    case "array":
    case "set":
      return `must have ${relation} ${counted("item")}`;
    case "object":
      return `must have ${relation} ${counted("key")}`;
    default:
      return exclusive
        ? `must be ${relation === "at most" ? "less" : "greater"} than ${limitText}`
        : `must be ${relation} ${limitText}`;
  }
}
