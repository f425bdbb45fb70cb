import { createHmac } from "node:crypto";
import { registerHostPath } from "@/server/shared/host-paths";
import type { Logger } from "@/server/logger";
import type { BerthJobCatalog } from "@/server/queue/catalog";
import type { QueueSet } from "@/server/queue/queues";
import { WorkspaceManager } from "@/server/workspace/manager/workspace-manager";
import type { EngineLogger } from "@/server/workspace/mcp/types";
import type { Workspace } from "@/server/workspace/workspace";
import type { InstallationIdSource } from "@/server/workspace/drivers/installation";
import type { TenantDriverSettings } from "@/server/workspace/drivers/driver";
import { RecordAttacher, type EnsureProvisioned } from "./record-attacher";
import { createDriverSet, type DriverSet } from "./driver-set";
import type { EngineConfig } from "./engine-config";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { createCheckpointStore } from "./checkpoint-config";

/**
 * The per-process composition of the workspace engine: ONE WorkspaceManager (shared by routers, chat, team
 * tools and worker jobs), the drivers of every enabled backend (their create, stop, purge and reconcile
 * operations are used by the workers only), the queues provisioning goes through, and the secret that signs download links.
 */
export type WorkspaceEngine = {
  readonly config: EngineConfig;
  readonly drivers: DriverSet;
  /** Attaches on a miss after the workers provisioned (see RecordAttacher). */
  readonly manager: WorkspaceManager;
  readonly queues: QueueSet<BerthJobCatalog>;
  /** Where turn checkpoints' files live (one store per process: it caches trees). */
  readonly checkpoints: CheckpointStore;
  /** HMAC key of `workspace.files.downloadToken` links (derived from the auth secret, never stored). */
  readonly downloadSecret: Buffer;
  readonly log: Logger;
  /**
   * When this process attached a cached workspace (epoch ms). A record whose state changed after that (the
   * workers stopped it) means the cached handle is stale and must be evicted before use.
   */
  attachedAt(workspace: Workspace): number | undefined;
  /**
   * Which generation of its id a cached workspace was attached to (a purge ends a generation; the next
   * use provisions a fresh one, and a handle of the old one must never serve it).
   */
  generationOf(workspace: Workspace): number | undefined;
  tagGeneration(workspace: Workspace, generation: number): void;
  close(): Promise<void>;
};

export type CreateEngineOptions = {
  config: EngineConfig;
  queues: QueueSet<BerthJobCatalog>;
  /** Secret the download-link key is derived from (the auth secret in production). */
  secret: string;
  log: Logger;
  /** This installation's id, labelled on shared-engine resources (the database's; see installation.ts). */
  installationId?: InstallationIdSource;
  /** Tenants' own backend settings (a tenant's E2B key), read by the drivers that support them. */
  tenantSettings?: TenantDriverSettings;
  /** Overrides the drivers (tests: a driver that blocks or counts). */
  drivers?: DriverSet;
  /**
   * Makes sure the workers provisioned a workspace and answers its backend and stored handle (the API's
   * provision gate: enqueue `workspace.provision` and wait). Passed in, so the engine imports no module.
   */
  ensureProvisioned: EnsureProvisioned;
  /**
   * The tenants whose idle TTL is shorter than the installation's (their policy): the cache detaches
   * their workspaces after their own idle time. Passed in, like the gate: the engine reads no database.
   */
  tenantIdleTtls?: () => Promise<ReadonlyMap<string, number>>;
};

export function createEngine(options: CreateEngineOptions): WorkspaceEngine {
  const { config, queues, log } = options;
  // Where workspaces and the install live on the host: never shown to a client (see host-paths.ts).
  registerHostPath(config.basedir);
  registerHostPath(process.cwd());
  const drivers =
    options.drivers ??
    createDriverSet(config, undefined, {
      installationId: options.installationId,
      tenantSettings: options.tenantSettings,
    });
  const engineLog = log.child({ component: "workspace-engine" });
  const attachedAt = new WeakMap<Workspace, number>();
  const generations = new WeakMap<Workspace, number>();
  const manager = new WorkspaceManager({
    attacher: new RecordAttacher(drivers, options.ensureProvisioned),
    ttlMs: config.idleTtlMs,
    ...(options.tenantIdleTtls ? { tenantTtls: options.tenantIdleTtls } : {}),
    evictIntervalMs: Math.min(config.sweepIntervalMs, config.idleTtlMs),
    workspaceOptions: {
      logger: toEngineLogger(engineLog),
      maxLiveStatefulMcps: config.maxLiveStatefulMcps ?? null,
      mcpNetwork: { allowedHosts: config.mcpAllowedHosts ?? [] },
      instructionsLabel: (kind) => drivers.definitionOf(kind)?.instructionsLabel ?? kind,
    },
    hooks: {
      onAttach: ({ workspace }) => attachedAt.set(workspace, Date.now()),
      onAttachError: ({ address, error }) =>
        engineLog.warn({ ...address, err: error }, "attaching a workspace failed"),
    },
  });
  return {
    config,
    drivers,
    manager,
    queues,
    checkpoints: createCheckpointStore({
      checkpointDir: config.checkpointDir ?? `${config.basedir}-checkpoints`,
      checkpointS3: config.checkpointS3 ?? null,
    }),
    downloadSecret: createHmac("sha256", options.secret).update("berth:workspace-download-token").digest(),
    log: engineLog,
    attachedAt: (workspace) => attachedAt.get(workspace),
    generationOf: (workspace) => generations.get(workspace),
    tagGeneration: (workspace, generation) => void generations.set(workspace, generation),
    close: async () => {
      await manager[Symbol.asyncDispose]();
      await drivers.close();
    },
  };
}

function toEngineLogger(log: Logger): EngineLogger {
  return {
    warn: (details, message) => log.warn(details, message),
    info: (details, message) => log.info(details, message),
    debug: (details, message) => log.debug(details, message),
  };
}
