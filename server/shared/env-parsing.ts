import type { z } from "zod";
import { AppError } from "./errors";

/** The raw environment: a plain string map, so tests pass their own instead of mutating process.env. */
export type RawEnv = Readonly<Record<string, string | undefined>>;

/** Empty strings count as unset: `FOO= npm start` must behave like not setting FOO at all. */
function withoutEmptyStrings(env: RawEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined && value !== "") out[key] = value;
  return out;
}

/**
 * Parses the part of the environment one concern needs (server/config's sections, each workspace driver's
 * own variables). Fails with every problem listed by variable name, so a misconfigured boot says exactly
 * what to set instead of failing later at first use. Reads nothing itself: callers pass the env.
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

/** exactOptionalPropertyTypes-safe: unset variables leave a schema's defaults in place. */
export function definedOnly<T extends Record<string, unknown>>(
  value: T,
): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}
