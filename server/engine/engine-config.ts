import path from "node:path";
import { z } from "zod";
import { parseEnv, readProcessEnv, type RawEnv } from "@/server/config/env";
import { AppError } from "@/server/shared/errors";
import { loadCheckpointS3Config } from "./checkpoint-config";
import { loadWarmPoolConfig, type WarmPoolConfig } from "./warm-pool-config";
import type { S3CheckpointStoreOptions } from "@/server/workspace/checkpoints/s3-checkpoint-store";
import type { DriverContext } from "@/server/workspace/drivers/driver";
import {
  DRIVERS,
  driverDefinition,
  type DriverName,
  type DriverRegistry,
} from "@/server/workspace/drivers/registry";

/** The engine's own variables; driver names are checked against the registry in use. */
const engineEnvOf = (registry: DriverRegistry) => {
  const names = Object.keys(registry) as [string, ...string[]];
  return z.object({
    // The default backend of this installation's workspaces (a name in server/workspace/drivers/registry.ts).
    // `local` (default): host folders, every command and stdio MCP server confined by bubblewrap.
    // `host-unconfined`: agent commands run on the host with Berth's own privileges, trusted agents only.
    BERTH_WORKSPACE_BACKEND: z.enum(names).default("local"),
    // Every backend tenants and agents may choose, comma-separated (default: only BERTH_WORKSPACE_BACKEND).
    // A workspace stays on the backend it was created on.
    BERTH_WORKSPACE_BACKENDS: z
      .string()
      .transform((value) =>
        value
          .split(",")
          .map((entry) => entry.trim())
          .filter(Boolean),
      )
      .pipe(z.array(z.enum(names)).min(1))
      .optional(),
    // Host folder holding workspaces (local: the workdirs; docker: the bind-mounted data). Relative → cwd.
    // Default: `workspaces/` in the installation's data folder (BERTH_DATA_DIR, else `.data`), so every
    // process of one installation agrees on it and two installations on one host never share it (each one's
    // reconcile reaps the folders its database does not know).
    BERTH_WORKSPACE_BASEDIR: z.string().optional(),
    // Host folder of the turn checkpoints' store (server/workspace/checkpoints/). Relative → cwd. Default:
    // `checkpoints/` in the installation's data folder, beside (never inside) the workspaces' folder.
    // With BERTH_CHECKPOINT_S3_BUCKET (checkpoint-config.ts) it only spools large blobs on their way up.
    BERTH_CHECKPOINT_DIR: z.string().optional(),
    // A READY workspace with no activity and no lease for this long is stopped by `workspace.sweep`.
    BERTH_WORKSPACE_IDLE_TTL_MS: z.coerce.number().int().min(1_000).default(3_600_000),
    // How often `workspace.sweep` runs (a BullMQ job scheduler: one tick per interval, whatever the replicas).
    BERTH_WORKSPACE_SWEEP_INTERVAL_MS: z.coerce.number().int().min(1_000).default(300_000),
    // How often `workspace.reconcile` looks for orphans and vanished workspaces.
    BERTH_WORKSPACE_RECONCILE_INTERVAL_MS: z.coerce.number().int().min(10_000).default(3_600_000),
    // Hard cap on how long one lease may pin a workspace, renewals included: a stuck turn cannot keep a
    // workspace (and its container) alive forever.
    BERTH_WORKSPACE_MAX_LEASE_MS: z.coerce
      .number()
      .int()
      .min(1_000)
      .default(6 * 3_600_000),
    // Default expiry of a lease; holders renew while they run, crashed holders simply expire.
    BERTH_WORKSPACE_LEASE_TTL_MS: z.coerce
      .number()
      .int()
      .min(1_000)
      .default(10 * 60_000),
    // How long an API call waits for the workers to provision a workspace before answering UNAVAILABLE.
    BERTH_WORKSPACE_PROVISION_WAIT_MS: z.coerce
      .number()
      .int()
      .min(1_000)
      .default(10 * 60_000),
    // Lifetime of a signed file-download link.
    BERTH_WORKSPACE_DOWNLOAD_TOKEN_TTL_MS: z.coerce.number().int().min(1_000).default(60_000),
    // Cap on live stateful MCP servers per workspace (in each process attached to it); the least recently
    // used scope's oldest one is closed beyond it. Unset or 0 → max(40, 2 × stateful default MCPs).
    BERTH_MAX_LIVE_STATEFUL_MCPS: z.coerce.number().int().min(0).max(10_000).default(0),
    // http_mcp/SSE hosts Berth may dial although they are loopback, link-local or private: comma-separated host
    // names, IP addresses or CIDR subnets (e.g. `127.0.0.1,mcp.internal,10.1.0.0/16`). Empty → public only.
    // Only its keys are read here (server/config/quotas.ts parses the rates): each is `*` or the kind of a
    // registered driver, so a misspelt backend fails at boot instead of silently costing the `*` rate.
    BERTH_METERING_RATES: z
      .string()
      .optional()
      .transform((text) => meteringKeys(text))
      .pipe(z.array(z.enum(["*", ...new Set(Object.values(registry).map((driver) => driver.kind))])))
      .optional(),
    BERTH_MCP_ALLOWED_HOSTS: z
      .string()
      .default("")
      .transform((value) =>
        value
          .split(",")
          .map((entry) => entry.trim())
          .filter((entry) => entry.length > 0),
      )
      .pipe(z.array(z.union([z.ipv4(), z.ipv6(), z.cidrv4(), z.cidrv6(), z.hostname()]))),
  });
};

/** The keys of BERTH_METERING_RATES' JSON object; none when unset or not an object (quotas.ts reports that). */
function meteringKeys(text: string | undefined): string[] {
  if (!text) return [];
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? Object.keys(parsed) : [];
  } catch {
    return [];
  }
}

export type EngineConfig = {
  /** The default driver: what a tenant without its own default gets. */
  readonly backend: DriverName;
  /** Every driver this installation runs (the default among them). Absent: only the default. */
  readonly backends?: readonly DriverName[];
  /** Each enabled driver's validated config (its own schema). Absent: the driver's defaults. */
  readonly drivers?: Readonly<Partial<Record<DriverName, unknown>>>;
  readonly basedir: string;
  /** The checkpoint store's folder. Absent: `<basedir>-checkpoints`, beside the workspaces' folder. */
  readonly checkpointDir?: string;
  /** The S3 bucket of the checkpoint store (checkpoint-config.ts); absent or null → the folder store. */
  readonly checkpointS3?: S3CheckpointStoreOptions | null;
  readonly idleTtlMs: number;
  readonly sweepIntervalMs: number;
  readonly reconcileIntervalMs: number;
  readonly maxLeaseMs: number;
  readonly leaseTtlMs: number;
  readonly provisionWaitMs: number;
  readonly downloadTokenTtlMs: number;
  /** The McpRegistry cap of every workspace (null: the reference's default, max(40, 2 × stateful defaults)). */
  readonly maxLiveStatefulMcps?: number | null;
  /** BERTH_MCP_ALLOWED_HOSTS (server/workspace/mcp/mcp-network-policy.ts); unset → public addresses only. */
  readonly mcpAllowedHosts?: readonly string[];
  /** BERTH_WARM_POOLS (warm-pool-config.ts). Absent: no pools. */
  readonly warmPools?: WarmPoolConfig;
};

/** Parses the workspace-engine part of the environment, each enabled driver's own variables included. */
export function loadEngineConfig(
  env: RawEnv = readProcessEnv(),
  cwd = process.cwd(),
  uid = process.getuid?.() ?? -1,
  registry: DriverRegistry = DRIVERS,
): EngineConfig {
  const parsed = parseEnv(engineEnvOf(registry), env, "workspace engine");
  const basedir = path.resolve(
    cwd,
    parsed.BERTH_WORKSPACE_BASEDIR ?? path.join(env.BERTH_DATA_DIR || ".data", "workspaces"),
  );
  const backends = enabledDrivers(parsed.BERTH_WORKSPACE_BACKEND, parsed.BERTH_WORKSPACE_BACKENDS, registry);
  const checkpointDir = path.resolve(
    cwd,
    parsed.BERTH_CHECKPOINT_DIR ?? path.join(env.BERTH_DATA_DIR || ".data", "checkpoints"),
  );
  const context = { basedir, cwd, uid };
  const drivers: Partial<Record<DriverName, unknown>> = {};
  for (const name of backends) drivers[name] = driverConfig(name, env, context, registry);
  return {
    backend: parsed.BERTH_WORKSPACE_BACKEND,
    backends,
    drivers,
    basedir,
    checkpointDir,
    checkpointS3: loadCheckpointS3Config(env, checkpointDir),
    idleTtlMs: parsed.BERTH_WORKSPACE_IDLE_TTL_MS,
    sweepIntervalMs: parsed.BERTH_WORKSPACE_SWEEP_INTERVAL_MS,
    reconcileIntervalMs: parsed.BERTH_WORKSPACE_RECONCILE_INTERVAL_MS,
    maxLeaseMs: parsed.BERTH_WORKSPACE_MAX_LEASE_MS,
    leaseTtlMs: parsed.BERTH_WORKSPACE_LEASE_TTL_MS,
    provisionWaitMs: parsed.BERTH_WORKSPACE_PROVISION_WAIT_MS,
    downloadTokenTtlMs: parsed.BERTH_WORKSPACE_DOWNLOAD_TOKEN_TTL_MS,
    maxLiveStatefulMcps: parsed.BERTH_MAX_LIVE_STATEFUL_MCPS || null,
    mcpAllowedHosts: parsed.BERTH_MCP_ALLOWED_HOSTS,
    warmPools: loadWarmPoolConfig(env, backends, registry),
  };
}

/** The default first; two drivers of one kind would share (and fight over) the same machines. */
function enabledDrivers(
  defaultName: DriverName,
  listed: readonly DriverName[] | undefined,
  registry: DriverRegistry,
): DriverName[] {
  const names = [...new Set([defaultName, ...(listed ?? [])])];
  if (listed && !listed.includes(defaultName)) {
    throw misconfigured(
      `BERTH_WORKSPACE_BACKENDS (${listed.join(",")}) must include BERTH_WORKSPACE_BACKEND (${defaultName})`,
      ["BERTH_WORKSPACE_BACKENDS"],
    );
  }
  const kinds = new Map<string, DriverName>();
  for (const name of names) {
    const other = kinds.get(driverDefinition(name, registry).kind);
    if (other) {
      throw misconfigured(
        `BERTH_WORKSPACE_BACKENDS enables both ${other} and ${name}, which run the same host folders: choose one`,
        ["BERTH_WORKSPACE_BACKENDS"],
      );
    }
    kinds.set(driverDefinition(name, registry).kind, name);
  }
  return names;
}

/** One driver's config from its own variables, validated by its own schema. */
function driverConfig(
  name: DriverName,
  env: RawEnv,
  context: DriverContext,
  registry: DriverRegistry = DRIVERS,
): unknown {
  const definition = driverDefinition(name, registry);
  const result = definition.configSchema.safeParse(definition.configFromEnv(env, context));
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => `  - ${issue.path.join(".")}: ${issue.message}`);
  throw misconfigured(`Invalid ${name} backend configuration:\n${problems.join("\n")}`, []);
}

function misconfigured(message: string, variables: string[]): AppError {
  return new AppError("INTERNAL", message, { userMessage: "Server misconfigured", details: { variables } });
}
