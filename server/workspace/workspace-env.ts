import { z } from "zod";

/**
 * Environment variables an agent's commands see (issue 25: "env vars per agent and per session, visible in
 * the workspace"): plain configuration, not secrets. They are stored as given, shown to every reader of the
 * agent or session, and set in the environment of the agent's Bash commands on every backend. An agent's
 * variables apply to all its sessions; a session's own override the agent's of the same name.
 *
 * Names are refused where Berth or the shell owns the variable (the workspace's PATH and HOME make the tools
 * work; `BERTH_` is Berth's own prefix), and values must fit an exec's environment (no NUL byte).
 */
export const WORKSPACE_ENV_LIMITS = { variables: 64, nameLength: 128, valueLength: 8192 } as const;

const RESERVED_NAMES = new Set(["HOME", "PATH", "PWD", "OLDPWD", "SHELL", "USER", "LOGNAME"]);

const ZEnvName = z
  .string()
  .max(WORKSPACE_ENV_LIMITS.nameLength)
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "a name is letters, digits and _, not starting with a digit")
  .refine((name) => !RESERVED_NAMES.has(name), "this variable is the workspace's own")
  .refine((name) => !name.toUpperCase().startsWith("BERTH_"), "BERTH_ is Berth's own prefix")
  // A valid shell name, but as an object key it sets the prototype instead of a variable.
  .refine((name) => name !== "__proto__", "__proto__ cannot be a variable's name here");

const ZEnvValue = z
  .string()
  .max(WORKSPACE_ENV_LIMITS.valueLength)
  .refine((value) => !value.includes("\0"), "a value cannot hold a NUL byte");

export const ZWorkspaceEnv = z
  .record(ZEnvName, ZEnvValue)
  .refine((env) => Object.keys(env).length <= WORKSPACE_ENV_LIMITS.variables, {
    message: `at most ${WORKSPACE_ENV_LIMITS.variables} variables`,
  })
  .describe(
    "Environment variables of the agent's commands (name → value). Not secret: stored and shown as given.",
  );
export type WorkspaceEnv = z.infer<typeof ZWorkspaceEnv>;

/**
 * A stored env column as the tools use it: what still parses (a row written before a rule tightened keeps
 * its other variables instead of failing every turn), in name order.
 */
export function storedWorkspaceEnv(value: unknown): WorkspaceEnv {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return {};
  const kept = Object.entries(value as Record<string, unknown>)
    .filter(([name, raw]) => ZEnvName.safeParse(name).success && ZEnvValue.safeParse(raw).success)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(kept) as WorkspaceEnv;
}

/** The environment a session's commands get: the agent's variables, then the session's over them. */
export function sessionCommandEnv(agentEnv: WorkspaceEnv, sessionEnv: WorkspaceEnv): WorkspaceEnv {
  return { ...agentEnv, ...sessionEnv };
}
