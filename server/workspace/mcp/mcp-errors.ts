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
