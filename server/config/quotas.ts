import { z } from "zod";
import { parseEnv, readProcessEnv, type RawEnv } from "./env";

/**
 * Installation defaults of the per-tenant quotas, and the metering rates budgets are counted in. A tenant's
 * overrides (TenantQuota) replace single values; everything else comes from here. 0 in a per-workspace
 * resource means "the backend's own setting" (BERTH_DOCKER_CPUS, BERTH_K8S_CPU_LIMIT, ...).
 */
const count = (fallback: number) => z.coerce.number().int().min(0).max(1_000_000_000).default(fallback);
const bytes = (fallback: number) =>
  z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(fallback);

/** Units one quantity of usage costs, per backend (an operator's price list, in any unit it likes). */
const ZMeteringRate = z
  .object({
    workspaceHour: z.number().min(0).default(0),
    provision: z.number().min(0).default(0),
    turn: z.number().min(0).default(0),
    inputTokensPerMillion: z.number().min(0).default(0),
    outputTokensPerMillion: z.number().min(0).default(0),
    toolCall: z.number().min(0).default(0),
  })
  .strict();
export type MeteringRate = z.output<typeof ZMeteringRate>;

/**
 * `{ "*": {...}, "docker": {...} }`: a backend kind's own rate, else the `*` rate, else nothing costs anything.
 * The keys are the ledger's backend keys, the drivers' kinds: the engine config checks them against the
 * driver registry (this bottom layer knows no drivers), so here only their form.
 */
const ZMeteringRates = z.record(
  z.union([z.literal("*"), z.string().regex(/^[a-z][a-z0-9-]{0,39}$/, "a backend kind or *")]),
  ZMeteringRate,
);

const ZQuotaEnv = z.object({
  BERTH_QUOTA_LIVE_WORKSPACES: count(50),
  BERTH_QUOTA_TOTAL_WORKSPACES: count(1_000),
  BERTH_QUOTA_CONCURRENT_TURNS: count(50),
  BERTH_QUOTA_PROVISIONS_PER_MINUTE: count(60),
  // 0: no limit. The pool is shared by the installation's tenants; a limit keeps one from draining it.
  BERTH_QUOTA_WARM_CLAIMS_PER_MINUTE: count(0),
  BERTH_QUOTA_WORKSPACE_CPUS: z.coerce.number().min(0).max(1_024).default(0),
  BERTH_QUOTA_WORKSPACE_MEMORY_BYTES: bytes(0),
  BERTH_QUOTA_WORKSPACE_DISK_BYTES: bytes(0),
  BERTH_QUOTA_MCP_SERVERS_PER_SCOPE: count(20),
  BERTH_QUOTA_SKILL_STORAGE_BYTES: bytes(512 * 1024 * 1024),
  BERTH_METERING_RATES: z
    .string()
    .default('{"*":{"workspaceHour":1}}')
    .transform((text, context) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        context.addIssue({ code: "custom", message: "must be JSON" });
        return z.NEVER;
      }
    })
    .pipe(ZMeteringRates),
  // How often the metering buffer is flushed at the latest (a flush is also requested on writes).
  BERTH_METERING_FLUSH_MS: z.coerce.number().int().min(100).max(3_600_000).default(10_000),
});

export type QuotaLimits = {
  readonly liveWorkspaces: number;
  readonly totalWorkspaces: number;
  readonly concurrentTurns: number;
  readonly provisionsPerMinute: number;
  /** First uses served from a warm pool in any 60 s (0: no limit); past it a first use is created cold. */
  readonly warmClaimsPerMinute: number;
  readonly workspaceCpus: number;
  readonly workspaceMemoryBytes: number;
  readonly workspaceDiskBytes: number;
  readonly mcpServersPerScope: number;
  readonly skillStorageBytes: number;
};

export type QuotaConfig = {
  readonly defaults: QuotaLimits;
  /** By backend kind (a driver's `kind`), and `*` for the others. */
  readonly rates: Readonly<Partial<Record<string, MeteringRate>>>;
  readonly meteringFlushMs: number;
};

export function loadQuotaConfig(env: RawEnv = readProcessEnv()): QuotaConfig {
  const parsed = parseEnv(ZQuotaEnv, env, "quotas");
  return {
    defaults: {
      liveWorkspaces: parsed.BERTH_QUOTA_LIVE_WORKSPACES,
      totalWorkspaces: parsed.BERTH_QUOTA_TOTAL_WORKSPACES,
      concurrentTurns: parsed.BERTH_QUOTA_CONCURRENT_TURNS,
      provisionsPerMinute: parsed.BERTH_QUOTA_PROVISIONS_PER_MINUTE,
      warmClaimsPerMinute: parsed.BERTH_QUOTA_WARM_CLAIMS_PER_MINUTE,
      workspaceCpus: parsed.BERTH_QUOTA_WORKSPACE_CPUS,
      workspaceMemoryBytes: parsed.BERTH_QUOTA_WORKSPACE_MEMORY_BYTES,
      workspaceDiskBytes: parsed.BERTH_QUOTA_WORKSPACE_DISK_BYTES,
      mcpServersPerScope: parsed.BERTH_QUOTA_MCP_SERVERS_PER_SCOPE,
      skillStorageBytes: parsed.BERTH_QUOTA_SKILL_STORAGE_BYTES,
    },
    rates: parsed.BERTH_METERING_RATES,
    meteringFlushMs: parsed.BERTH_METERING_FLUSH_MS,
  };
}
