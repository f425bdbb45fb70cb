import type { z } from "zod";
import { AppError } from "@/server/shared/errors";

/**
 * Validates untrusted input at a domain boundary: returns the parsed value or throws AppError
 * BAD_REQUEST carrying the zod issues (so callers other than tRPC get the one error type too).
 */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issues = result.error.issues.map((i) => ({ path: i.path.join("."), message: i.message }));
  throw new AppError(
    "BAD_REQUEST",
    `invalid input: ${issues.map((i) => `${i.path || "(root)"}: ${i.message}`).join("; ")}`,
    {
      cause: result.error,
      userMessage: issues[0] ? `${issues[0].path || "input"}: ${issues[0].message}` : "Invalid input.",
      details: { issues },
    },
  );
}
