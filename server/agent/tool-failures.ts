import { z } from "zod";
import { isAppError } from "@/server/shared/errors";
import type { AgentToolResult } from "./ports";

/** A tool input that failed its schema, said to the model so it can call again. */
export function invalidInput(tool: string, error: z.ZodError): AgentToolResult {
  return { content: `Error: invalid input for ${tool}: ${z.prettifyError(error)}`, isError: true };
}

/**
 * Runs a tool's work: domain failures become error results the model can react to (an AppError says its
 * user message); a cancellation propagates, so the turn ends as cancelled.
 */
export async function guarded(
  signal: AbortSignal | undefined,
  work: () => Promise<AgentToolResult>,
): Promise<AgentToolResult> {
  try {
    return await work();
  } catch (error) {
    if (signal?.aborted) throw error;
    const message = isAppError(error)
      ? error.userMessage
      : error instanceof Error
        ? error.message
        : String(error);
    return { content: `Error: ${message}`, isError: true };
  }
}
