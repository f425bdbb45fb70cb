import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { AppError, isAppError, type AppErrorCode } from "@/server/shared/errors";

/** Where an MCP failure happened, attached to the AppError's details for logs and API clients. */
export type McpErrorContext = { mcp: string; tool?: string; phase: "connect" | "list" | "call" };

/**
 * Maps anything an MCP SDK client throws to an AppError, exactly once. Protocol errors keep their
 * JSON-RPC meaning; transport failures (refused connection, dead process, closed stream) are UNAVAILABLE
 * because a retry may succeed.
 */
export function toMcpAppError(error: unknown, context: McpErrorContext, timeoutMs?: number): AppError {
  if (isAppError(error)) return error;
  const where = context.tool ? `${context.mcp}.${context.tool}` : context.mcp;
  const cause = error instanceof Error ? error.message : String(error);
  const details: Record<string, unknown> = { ...context };
  if (isTimeout(error)) {
    if (timeoutMs !== undefined) details.timeoutMs = timeoutMs;
    return new AppError("TIMEOUT", `MCP ${context.phase} ${where} timed out`, { cause: error, details });
  }
  const spawnFailure = context.phase === "connect" ? spawnFailureReason(error) : undefined;
  if (spawnFailure) {
    // The declaration names a command that cannot run: the caller's mistake, and a retry cannot fix it.
    details.reason = spawnFailure;
    return new AppError("UNPROCESSABLE", `MCP ${context.phase} ${where} failed: ${cause}`, {
      cause: error,
      userMessage: `The MCP server '${context.mcp}' could not be started: ${SPAWN_FAILURES[spawnFailure]}.`,
      details,
    });
  }
  if (isAbort(error)) {
    details.aborted = true;
    return new AppError("UNAVAILABLE", `MCP ${context.phase} ${where} was aborted`, {
      cause: error,
      details,
    });
  }
  const code: AppErrorCode = error instanceof McpError ? codeForMcpError(error.code) : "UNAVAILABLE";
  if (error instanceof McpError) details.mcpErrorCode = error.code;
  return new AppError(code, `MCP ${context.phase} ${where} failed: ${cause}`, { cause: error, details });
}

function codeForMcpError(code: number): AppErrorCode {
  if (code === Number(ErrorCode.InvalidParams)) return "BAD_REQUEST";
  if (code === Number(ErrorCode.MethodNotFound)) return "NOT_FOUND";
  if (code === Number(ErrorCode.ConnectionClosed)) return "UNAVAILABLE";
  // The upstream server answered with an error: retrying the same request will not help.
  return "UNPROCESSABLE";
}

function isTimeout(error: unknown): boolean {
  if (error instanceof McpError) return error.code === Number(ErrorCode.RequestTimeout);
  return error instanceof Error && error.name === "TimeoutError";
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && error.name === "AbortError";
}

/** errno codes of a command that could not be executed at all, with what to tell the caller. */
const SPAWN_FAILURES = {
  ENOENT: "its command was not found",
  EACCES: "its command is not executable",
  ENOTDIR: "its command's path is not valid",
  ENOEXEC: "its command is not an executable format",
} as const;

/** The errno code when `error` is a failed spawn (child_process 'error' with syscall `spawn …`). */
function spawnFailureReason(error: unknown): keyof typeof SPAWN_FAILURES | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, syscall } = error as NodeJS.ErrnoException;
  if (!syscall?.startsWith("spawn") || !code || !Object.hasOwn(SPAWN_FAILURES, code)) return undefined;
  return code as keyof typeof SPAWN_FAILURES;
}

/** The end of a server's stderr quoted in the message: its last lines, bounded. */
const QUOTED_STDERR_LINES = 5;
const QUOTED_STDERR_CHARS = 600;

/**
 * A stdio server that ended before it completed the MCP handshake (it crashed, its command or arguments
 * are wrong, a dependency is missing, a shell did not find the command: exit 127). It is the declaration
 * that failed, not Berth, and the same declaration fails again: UNPROCESSABLE (not retryable), with the exit
 * code and the end of its stderr in the message, which is what the caller needs to fix it.
 */
export function mcpServerExited(
  mcp: string,
  exit: { code: number | null; signal: string | null },
  stderr: string,
  cause: unknown,
  phase: "connect" | "list" = "connect",
): AppError {
  const how = exit.signal ? `was ended by ${exit.signal}` : `exited with code ${exit.code}`;
  const tail = stderr
    .split("\n")
    .map((line) => line.trimEnd())
    .filter((line) => line !== "")
    .slice(-QUOTED_STDERR_LINES)
    .join(" | ")
    .slice(-QUOTED_STDERR_CHARS);
  const message =
    `The MCP server '${mcp}' ${how} ${phase === "connect" ? "before it answered" : "while listing its tools"}` +
    (tail ? `; its stderr ends: ${tail}` : "; it wrote nothing to stderr");
  return new AppError("UNPROCESSABLE", message, {
    cause,
    details: {
      mcp,
      phase,
      reason: "server_exited",
      exitCode: exit.code,
      signal: exit.signal,
      ...(stderr ? { stderr } : {}),
    },
  });
}
