import { z } from "zod";
import { AppError } from "@/server/shared/errors";

/** The raw environment: a plain string map, so tests pass their own instead of mutating process.env. */
export type RawEnv = Readonly<Record<string, string | undefined>>;

/**
 * The one place in server code that touches `process.env`. Everything else receives a RawEnv or, better,
 * a parsed config object (see config.ts).
 */
export function readProcessEnv(): RawEnv {
  return process.env;
}

/** Empty strings count as unset: `FOO= npm start` must behave like not setting FOO at all. */
function withoutEmptyStrings(env: RawEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined && value !== "") out[key] = value;
  return out;
}

/**
 * Parses the part of the environment one concern needs. Fails with every problem listed by variable
 * name, so a misconfigured boot says exactly what to set instead of failing later at first use.
 */
export function parseEnv<S extends z.ZodType>(schema: S, env: RawEnv, concern: string): z.output<S> {
  const result = schema.safeParse(withoutEmptyStrings(env));
  if (result.success) return result.data;
  const problems = result.error.issues.map(
    (issue) => `  - ${issue.path.join(".") || "(env)"}: ${issue.message}`,
  );
  throw new AppError("INTERNAL", `Invalid ${concern} configuration:\n${problems.join("\n")}`, {
    userMessage: "Server misconfigured",
    details: { concern, variables: result.error.issues.map((issue) => issue.path.join(".")) },
  });
}

/** `true/false/1/0/yes/no/on/off`, case-insensitive (zod 4's stringbool). */
export const zFlag = () => z.stringbool();
