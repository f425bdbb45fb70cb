import path from "node:path";
import { z } from "zod";
import type { DriverContext } from "@/server/workspace/drivers/driver";

/**
 * Configuration of the E2B driver, read once at boot (`configFromEnv` → `ZE2bDriverConfig`). Every message
 * names the environment variable to fix, so a bad value stops the process with a line an operator can act on.
 */

const flag = (name: string) =>
  z.preprocess(
    (value) => {
      if (typeof value !== "string") return value;
      const normalized = value.trim().toLowerCase();
      if (["1", "true", "yes", "on"].includes(normalized)) return true;
      if (["0", "false", "no", "off", ""].includes(normalized)) return false;
      return value;
    },
    z.boolean({ error: `${name} must be true or false` }),
  );

const milliseconds = (name: string, min: number) =>
  z.coerce
    .number({ error: `${name} must be a number of milliseconds` })
    .int()
    .min(min, `${name} must be ≥ ${min} ms`);

const absolutePosix = (name: string) =>
  z
    .string()
    .refine(
      (value) => path.posix.isAbsolute(value) && !value.includes("\0"),
      `${name} must be an absolute path`,
    )
    .transform((value) => path.posix.normalize(value).replace(/(.)\/$/, "$1"));

export const ZE2bDriverConfig = z
  .object({
    apiKey: z
      .string({ error: "E2B_API_KEY is required for the e2b backend (an API key of your E2B team)" })
      .min(1, "E2B_API_KEY is required for the e2b backend (an API key of your E2B team)"),
    /** E2B_DOMAIN: the E2B installation (default e2b.app); exposed ports are `<port>-<id>.<domain>`. */
    domain: z.string().min(1).optional(),
    /** BERTH_E2B_API_URL / BERTH_E2B_SANDBOX_URL: a self-hosted or emulated E2B (both, or neither). */
    apiUrl: z.url({ error: "BERTH_E2B_API_URL must be a URL" }).optional(),
    sandboxUrl: z.url({ error: "BERTH_E2B_SANDBOX_URL must be a URL" }).optional(),
    /** The template every workspace sandbox starts from (its CPU and memory are the template's). */
    template: z.string().min(1, "BERTH_E2B_TEMPLATE must not be empty").default("base"),
    /** The template's unprivileged user: agent commands and files run as it. */
    user: z
      .string()
      .regex(/^[a-z_][a-z0-9_-]{0,31}$/, "BERTH_E2B_USER must be a Linux user name")
      .default("user"),
    workdir: absolutePosix("BERTH_E2B_WORKDIR").default("/home/user/workspace"),
    /**
     * Written into every sandbox's metadata: reconcile lists and reaps only this installation's sandboxes
     * when several Berth installations (or other software) share one E2B team. Unset: the installation's
     * own id (server/modules/installation), and sandboxes made before under the old default `berth` stay
     * usable through their stored handles (never listed or reaped).
     */
    installation: z
      .string()
      .regex(/^[a-zA-Z0-9_.-]{1,64}$/, "BERTH_E2B_INSTALLATION must be 1-64 letters, digits, '.', '_' or '-'")
      .optional(),
    /** Berth's idle TTL (BERTH_WORKSPACE_IDLE_TTL_MS): the sandbox's E2B timeout is kept above it. */
    idleTtlMs: milliseconds("BERTH_WORKSPACE_IDLE_TTL_MS", 1_000).default(3_600_000),
    /** How far the E2B timeout reaches past Berth's idle TTL, so Berth's sweep (recorded) acts first. */
    timeoutMarginMs: milliseconds("BERTH_E2B_TIMEOUT_MARGIN_MS", 0).default(5 * 60_000),
    /** E2B's cap on a sandbox timeout: 1 h on Hobby teams, 24 h on Pro. */
    maxSandboxTimeoutMs: milliseconds("BERTH_E2B_MAX_SANDBOX_TIMEOUT_MS", 10_000).default(3_600_000),
    /** What E2B does when the timeout passes anyway (Berth down): pause keeps the files, kill loses them. */
    onTimeout: z
      .enum(["pause", "kill"], { error: "BERTH_E2B_ON_TIMEOUT must be pause or kill" })
      .default("pause"),
    /** `stop` pauses with memory (processes resume where they were), else files only. */
    pauseKeepsMemory: flag("BERTH_E2B_PAUSE_KEEPS_MEMORY").default(true),
    /** Outbound internet from sandboxes (off by default, like Docker's network `none`). */
    allowInternetAccess: flag("BERTH_E2B_INTERNET").default(false),
    /** Bound on one control-plane or envd request (not on commands, which carry their own timeouts). */
    requestTimeoutMs: milliseconds("BERTH_E2B_REQUEST_TIMEOUT_MS", 1_000).default(30_000),
    /** Bound on Berth's own in-sandbox chores (tar of an archive, a move, a realpath). */
    choreTimeoutMs: milliseconds("BERTH_E2B_CHORE_TIMEOUT_MS", 1_000).default(10 * 60_000),
    /** The template must give at least this (checked on create; E2B sizes sandboxes per template). */
    minCpuCount: z.coerce.number({ error: "BERTH_E2B_CPU_COUNT must be a number" }).int().min(1).optional(),
    minMemoryMB: z.coerce.number({ error: "BERTH_E2B_MEMORY_MB must be a number" }).int().min(128).optional(),
    /** Extra environment of every command. */
    env: z.record(z.string(), z.string()).default({}),
    gateway: z
      .object({
        /** The in-sandbox port the gateway listens on (127.0.0.1); reached through `getHost(port)`. */
        port: z.coerce.number().int().min(1024).max(65535).default(49990),
        callTimeoutMs: z.coerce.number().int().positive().default(30_000),
        startTimeoutMs: z.coerce.number().int().positive().default(30_000),
      })
      .prefault({}),
    /** A prebuilt gateway bundle (`npm run build:gateway`); unset → bundled from the sources. */
    gatewayBundlePath: z.string().optional(),
    /** The template's Node (the gateway's runtime inside the sandbox). */
    nodeCommand: z.string().min(1).default("node"),
    /**
     * Host folder of the gateway credentials (0600 files, one per sandbox). Shared by the API processes and
     * workers of one installation, as Docker's runtime root is. Default: <BERTH_WORKSPACE_BASEDIR>/.runtime/e2b.
     */
    runtimeDir: z
      .string()
      .refine((value) => path.isAbsolute(value), "BERTH_E2B_RUNTIME_DIR must be absolute")
      .optional(),
  })
  .superRefine((config, context) => {
    if (config.sandboxUrl && !config.apiUrl) {
      context.addIssue({
        code: "custom",
        path: ["apiUrl"],
        message: "BERTH_E2B_SANDBOX_URL needs BERTH_E2B_API_URL (a self-hosted E2B has both)",
      });
    }
  });

export type E2bDriverConfig = z.infer<typeof ZE2bDriverConfig>;
export type E2bDriverConfigInput = z.input<typeof ZE2bDriverConfig>;

/** The E2B timeout Berth keeps every live sandbox at: past the idle TTL, within E2B's cap. */
export function sandboxTimeoutMs(config: E2bDriverConfig): number {
  return Math.min(config.idleTtlMs + config.timeoutMarginMs, config.maxSandboxTimeoutMs);
}

export function runtimeDirOf(config: E2bDriverConfig, context: DriverContext): string {
  return config.runtimeDir ?? path.join(context.basedir, ".runtime", "e2b");
}

/** The driver's variables, as config input (validated by ZE2bDriverConfig). */
export function e2bConfigFromEnv(env: Readonly<Record<string, string | undefined>>): Record<string, unknown> {
  const set = (value: string | undefined) => (value === undefined || value.trim() === "" ? undefined : value);
  const gateway = {
    port: set(env.BERTH_E2B_GATEWAY_PORT),
    callTimeoutMs: set(env.BERTH_E2B_GATEWAY_CALL_TIMEOUT_MS),
    startTimeoutMs: set(env.BERTH_E2B_GATEWAY_START_TIMEOUT_MS),
  };
  return {
    apiKey: set(env.E2B_API_KEY),
    domain: set(env.E2B_DOMAIN),
    apiUrl: set(env.BERTH_E2B_API_URL) ?? set(env.E2B_API_URL),
    sandboxUrl: set(env.BERTH_E2B_SANDBOX_URL) ?? set(env.E2B_SANDBOX_URL),
    template: set(env.BERTH_E2B_TEMPLATE),
    user: set(env.BERTH_E2B_USER),
    workdir: set(env.BERTH_E2B_WORKDIR),
    installation: set(env.BERTH_E2B_INSTALLATION),
    idleTtlMs: set(env.BERTH_WORKSPACE_IDLE_TTL_MS),
    timeoutMarginMs: set(env.BERTH_E2B_TIMEOUT_MARGIN_MS),
    maxSandboxTimeoutMs: set(env.BERTH_E2B_MAX_SANDBOX_TIMEOUT_MS),
    onTimeout: set(env.BERTH_E2B_ON_TIMEOUT),
    pauseKeepsMemory: set(env.BERTH_E2B_PAUSE_KEEPS_MEMORY),
    allowInternetAccess: set(env.BERTH_E2B_INTERNET),
    requestTimeoutMs: set(env.BERTH_E2B_REQUEST_TIMEOUT_MS),
    choreTimeoutMs: set(env.BERTH_E2B_CHORE_TIMEOUT_MS),
    minCpuCount: set(env.BERTH_E2B_CPU_COUNT),
    minMemoryMB: set(env.BERTH_E2B_MEMORY_MB),
    gateway,
    gatewayBundlePath: set(env.BERTH_E2B_GATEWAY_BUNDLE),
    nodeCommand: set(env.BERTH_E2B_NODE),
    runtimeDir: set(env.BERTH_E2B_RUNTIME_DIR),
  };
}

/**
 * What a tenant may set for its own workspaces (stored per tenant, the key sealed; see
 * server/modules/backend-settings): its E2B team's API key, the installation's domain, the template and the
 * minimum size. The API URL is not a tenant setting: a tenant cannot point the workers at a host of its
 * choosing. Absent fields are the installation's.
 */
export const ZE2bTenantSettings = z
  .object({
    // `title`: the field's name on the tenant settings card (server/modules/backend-settings), in this order.
    apiKey: z
      .string()
      .trim()
      .min(8, "an E2B API key has at least 8 characters")
      .max(512)
      .optional()
      .meta({ title: "API key" }),
    template: z
      .string()
      .trim()
      .regex(/^[a-zA-Z0-9][a-zA-Z0-9_./:-]{0,127}$/, "a template name or id")
      .optional()
      .meta({ title: "Template" }),
    domain: z
      .string()
      .trim()
      .regex(/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/i, "a domain like e2b.app")
      .optional()
      .meta({ title: "Domain" }),
    minCpuCount: z.number().int().min(1).max(64).optional().meta({ title: "Min vCPU" }),
    minMemoryMB: z.number().int().min(128).max(262_144).optional().meta({ title: "Min memory (MB)" }),
  })
  .strict();
export type E2bTenantSettings = z.infer<typeof ZE2bTenantSettings>;

/** The installation's config with a tenant's settings over it. */
export function withTenantSettings(config: E2bDriverConfig, settings: E2bTenantSettings): E2bDriverConfig {
  const defined = Object.fromEntries(Object.entries(settings).filter(([, value]) => value !== undefined));
  return { ...config, ...defined };
}
