import path from "node:path";
import { z } from "zod";
import { parseEnv, readProcessEnv, zFlag, type RawEnv } from "@/server/config/env";
import { AppError } from "@/server/shared/errors";
import type { TSandboxConfigInput } from "@/server/workspace/backends/bubblewrap/sandbox-config";
import type { TDockerProviderConfigInput } from "@/server/workspace/backends/docker/docker-config";

const ZEngineEnv = z.object({
  // Which backend every workspace of this installation runs on. `local` (default): host folders, every
  // command and stdio MCP server confined by bubblewrap. `host-unconfined`: agent commands run on the
  // host with Berth's own privileges, trusted agents only (the API reports isolated: false).
  BERTH_WORKSPACE_BACKEND: z.enum(["local", "host-unconfined", "docker"]).default("local"),
  // host-unconfined as root hands the machine to every agent: refused unless this says so as well.
  BERTH_HOST_UNCONFINED_ALLOW_ROOT: zFlag().default(false),
  // The `local` sandbox (server/workspace/backends/bubblewrap/README.md). Unset → the sandbox defaults.
  BERTH_SANDBOX_BWRAP: z.string().optional(),
  BERTH_SANDBOX_NETWORK: zFlag().optional(),
  BERTH_SANDBOX_PIDS_LIMIT: z.coerce.number().int().min(16).optional(),
  BERTH_SANDBOX_COMMAND_TIMEOUT_MS: z.coerce.number().int().min(1_000).optional(),
  BERTH_SANDBOX_UID_BASE: z.coerce.number().int().min(1_000).optional(),
  BERTH_SANDBOX_UID_COUNT: z.coerce.number().int().min(1).optional(),
  // Host paths visible read-only in every sandbox at the same path, separated by ":" (tool installs).
  BERTH_SANDBOX_READONLY_PATHS: z
    .string()
    .transform((value) => value.split(":").filter(Boolean))
    .pipe(z.array(z.string().refine((p) => path.isAbsolute(p), "must be absolute paths")))
    .optional(),
  BERTH_SANDBOX_RUNTIME_ROOT: z.string().optional(),
  // Host folder holding workspaces (local: the workdirs; docker: the bind-mounted data). Relative → cwd.
  BERTH_WORKSPACE_BASEDIR: z.string().default(".data/workspaces"),
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
  // Docker backend only (see server/workspace/backends/docker/README.md). Unset → the provider's defaults.
  DOCKER_SOCKET: z.string().optional(),
  BERTH_DOCKER_BASE_IMAGE: z.string().optional(),
  // Workspace containers' network: "none" (default) cuts all egress.
  BERTH_DOCKER_NETWORK_MODE: z.string().optional(),
  // Host dir of the per-workspace gateway sockets; shared by API and workers (they attach through it).
  BERTH_DOCKER_RUNTIME_ROOT: z.string().optional(),
  BERTH_DOCKER_GATEWAY_BUNDLE: z.string().optional(),
  BERTH_DOCKER_CPUS: z.coerce.number().positive().optional(),
  BERTH_DOCKER_MEMORY_BYTES: z.coerce.number().int().positive().optional(),
  BERTH_DOCKER_PIDS_LIMIT: z.coerce.number().int().positive().optional(),
  // Unused workspace images of an earlier Berth or config are pruned by reconcile once this old.
  BERTH_DOCKER_IMAGE_GC_MIN_AGE_MS: z.coerce.number().int().min(0).optional(),
});

export type EngineConfig = {
  readonly backend: "local" | "host-unconfined" | "docker";
  readonly basedir: string;
  readonly idleTtlMs: number;
  readonly sweepIntervalMs: number;
  readonly reconcileIntervalMs: number;
  readonly maxLeaseMs: number;
  readonly leaseTtlMs: number;
  readonly provisionWaitMs: number;
  readonly downloadTokenTtlMs: number;
  /** The `local` backend's sandbox; validated by its own schema (sandbox-config.ts). */
  readonly sandbox?: TSandboxConfigInput;
  /** Docker provider settings; `dataRoot` is always `basedir`. Validated by the provider's own schema. */
  readonly docker?: Omit<TDockerProviderConfigInput, "dataRoot">;
};

/** Parses the workspace-engine part of the environment (composition roots only). */
export function loadEngineConfig(
  env: RawEnv = readProcessEnv(),
  cwd = process.cwd(),
  uid = process.getuid?.() ?? -1,
): EngineConfig {
  const parsed = parseEnv(ZEngineEnv, env, "workspace engine");
  if (
    parsed.BERTH_WORKSPACE_BACKEND === "host-unconfined" &&
    uid === 0 &&
    !parsed.BERTH_HOST_UNCONFINED_ALLOW_ROOT
  ) {
    throw new AppError(
      "INTERNAL",
      "BERTH_WORKSPACE_BACKEND=host-unconfined refuses to run as root: every agent command would run as " +
        "root on this machine. Run Berth as an unprivileged user, use the default confined backend " +
        "(unset BERTH_WORKSPACE_BACKEND), or, if you really mean it, also set " +
        "BERTH_HOST_UNCONFINED_ALLOW_ROOT=1.",
      { userMessage: "Server misconfigured", details: { variables: ["BERTH_HOST_UNCONFINED_ALLOW_ROOT"] } },
    );
  }
  return {
    backend: parsed.BERTH_WORKSPACE_BACKEND,
    basedir: path.resolve(cwd, parsed.BERTH_WORKSPACE_BASEDIR),
    idleTtlMs: parsed.BERTH_WORKSPACE_IDLE_TTL_MS,
    sweepIntervalMs: parsed.BERTH_WORKSPACE_SWEEP_INTERVAL_MS,
    reconcileIntervalMs: parsed.BERTH_WORKSPACE_RECONCILE_INTERVAL_MS,
    maxLeaseMs: parsed.BERTH_WORKSPACE_MAX_LEASE_MS,
    leaseTtlMs: parsed.BERTH_WORKSPACE_LEASE_TTL_MS,
    provisionWaitMs: parsed.BERTH_WORKSPACE_PROVISION_WAIT_MS,
    downloadTokenTtlMs: parsed.BERTH_WORKSPACE_DOWNLOAD_TOKEN_TTL_MS,
    sandbox: withoutUndefined({
      bwrapPath: parsed.BERTH_SANDBOX_BWRAP,
      network: parsed.BERTH_SANDBOX_NETWORK,
      pidsLimit: parsed.BERTH_SANDBOX_PIDS_LIMIT,
      commandTimeoutMs: parsed.BERTH_SANDBOX_COMMAND_TIMEOUT_MS,
      uidBase: parsed.BERTH_SANDBOX_UID_BASE,
      uidCount: parsed.BERTH_SANDBOX_UID_COUNT,
      readOnlyPaths: parsed.BERTH_SANDBOX_READONLY_PATHS,
      runtimeRoot: parsed.BERTH_SANDBOX_RUNTIME_ROOT && path.resolve(cwd, parsed.BERTH_SANDBOX_RUNTIME_ROOT),
    }),
    docker: withoutUndefined({
      socketPath: parsed.DOCKER_SOCKET,
      baseImage: parsed.BERTH_DOCKER_BASE_IMAGE,
      networkMode: parsed.BERTH_DOCKER_NETWORK_MODE,
      runtimeRoot: parsed.BERTH_DOCKER_RUNTIME_ROOT && path.resolve(cwd, parsed.BERTH_DOCKER_RUNTIME_ROOT),
      gatewayBundlePath:
        parsed.BERTH_DOCKER_GATEWAY_BUNDLE && path.resolve(cwd, parsed.BERTH_DOCKER_GATEWAY_BUNDLE),
      cpus: parsed.BERTH_DOCKER_CPUS,
      memoryBytes: parsed.BERTH_DOCKER_MEMORY_BYTES,
      pidsLimit: parsed.BERTH_DOCKER_PIDS_LIMIT,
      imageGcMinAgeMs: parsed.BERTH_DOCKER_IMAGE_GC_MIN_AGE_MS,
    }),
  };
}

/** exactOptionalPropertyTypes-safe: unset env vars leave the provider's defaults in place. */
function withoutUndefined<T extends Record<string, unknown>>(
  value: T,
): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}
