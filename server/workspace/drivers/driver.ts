import type { InstallationIdSource } from "@/server/workspace/drivers/installation";
import type { z } from "zod";
import type { McpNetworkPolicy } from "@/server/workspace/mcp/mcp-network-policy";
import type { IsolationPolicy } from "@/server/workspace/manager/isolation";
import type { McpConnector } from "@/server/workspace/mcp/types";
import type { MachineUsage } from "@/server/workspace/drivers/machine-usage";
import type { BackendKind, WorkspaceMachine } from "@/server/workspace/drivers/port";

/**
 * The driver seam: everything one backend (a folder under server/workspace/drivers/) gives Berth, as ONE
 * object, `WorkspaceDriver`: the facts about the backend, each stated once (name, kind, summary,
 * persistence, isolation, capabilities), and one set of operations on its machines:
 *   - `create` (the WORKERS' provision job: create or restart the machine, return the handle to store),
 *     `stop`, `purge`, `exists`, `listResources`, `reap`, `usage`, `pruneImages`: what the workers do;
 *   - `attach` (ANY process: the live `WorkspaceMachine` of a created machine, port.ts), `isAlive`,
 *     `detach`, `connectMcp`: what a Workspace does with its machine.
 * What differs between backends is stated in the facts, never by checking `kind`.
 * The registry (server/workspace/drivers/registry.ts) maps a driver name to its DriverDefinition.
 */

/**
 * What `create` returned and the workspace record stores (`backendHandle`): the REATTACH KEY. Backends
 * whose resource ids are assigned remotely (an E2B sandbox id) find their machine again only through it;
 * backends whose names derive from the workspace id may ignore it. JSON, never secrets.
 */
export type BackendHandle = Record<string, unknown>;

/** Who a workspace belongs to and under which id: everything a driver may use to place and name it. */
export type WorkspaceSpec = {
  workspaceId: string;
  tenantId: string;
  userId: string;
  /** The agent whose request created the workspace ("" when none); informational for naming/labels. */
  agentId: string;
  isolation: IsolationPolicy;
  /** The stored handle of the last `create` (null or absent before the first one, and after a purge). */
  handle?: BackendHandle | null;
  /**
   * The tenant's per-workspace resource quotas, for the machine `create` makes. Docker lowers its
   * CPU and memory limits to them; Kubernetes uses them as the Pod's CPU and memory limits and the claim's
   * size; the host-folder backends and E2B ignore them. Absent fields leave the backend's own setting.
   */
  resources?: WorkspaceResources;
};

export type WorkspaceResources = { cpus?: number; memoryBytes?: number; diskBytes?: number };

/** What a backend can and cannot do beyond running commands, for the engine, the API and the dashboard. */
export type DriverCapabilities = {
  /** The machine's files are this host's files (WorkspaceMachine.hostPath works; bulk writes go direct). */
  readonly hostPaths: boolean;
  /** `stop` keeps the machine's memory (a paused sandbox resumes where it was), not only its files. */
  readonly pauseKeepsMemory: boolean;
  /**
   * How MCP servers of a workspace run: `host` (this process spawns them: host-unconfined only),
   * `unix-socket` (an in-sandbox gateway behind a socket in a host folder), `exec-stream` (an in-sandbox
   * gateway reached through the backend's exec/attach channel), `sandbox-url` (an in-sandbox gateway on a
   * port the sandbox exposes).
   */
  readonly gateway: "host" | "unix-socket" | "exec-stream" | "sandbox-url";
  /**
   * The machine can vanish behind Berth's back (a container removed, a sandbox expired, a Pod evicted), so a
   * cache hit checks liveness first. False for host folders, which only Berth deletes.
   */
  readonly mayVanish: boolean;
  /** The machine offers `openPty` (an interactive terminal inside the same confinement as `exec`). */
  readonly pty: boolean;
  /**
   * The machine offers `openTunnel` (preview URLs: a TCP connection to a port on the machine's loopback).
   * Docker: through the gateway's tunnel upgrade on its unix socket; bubblewrap: into the network namespace
   * of the sandbox that listens (root only, private network only). False where the driver cannot tunnel
   * (host-unconfined: its loopback is the host's; E2B and Kubernetes: not built yet).
   */
  readonly previews: boolean;
  /**
   * The driver keeps warm pools (server/modules/pool/): it offers `createIdleMachine`, `bindIdleMachine`,
   * `discardIdleMachine`, `listIdleMachines` and `warmPoolKey`, so a first use can take a machine made
   * before anyone asked instead of creating one.
   */
  readonly warmPool: boolean;
};

/** What a driver confines, for the engine, the API and the dashboard. */
type DriverIsolation = {
  /**
   * Agent commands cannot reach the host. False only for `host-unconfined`, whose commands run on the
   * host with Berth's privileges (trusted agents only).
   */
  readonly isolated: boolean;
  /** The sandbox technology, when there is one besides the backend itself ("bubblewrap", a runtime class). */
  readonly sandbox: string | null;
};

/** A backend resource (folder, container, sandbox, Pod) that carries Berth's naming, found by `listResources`. */
export type MachineResource = {
  /** Decoded from the resource's name or labels; null when it cannot be decoded (hashed names). */
  workspaceId: string | null;
  tenantId: string | null;
  /** What an operator would look for: the folder path, the container name, the sandbox id. */
  locator: string;
};

/** How a long deletion (a purge, a reap) is stopped (shutdown, a lost claim) and kept alive. */
export type MachineDeletionOptions = {
  signal?: AbortSignal | undefined;
  /** Awaited between batches: renew claims here; throwing stops the deletion. */
  onProgress?: ((progress: { files: number; directories: number }) => unknown) | undefined;
};

/** One step of a machine's `create` (image build lines, container created, gateway ready, ...). */
export type CreateProgress = {
  step: string;
  detail?: string | undefined;
  /** The step found the machine's files gone (recorded as a `data_lost` event, not a step of `create`). */
  dataLost?: boolean;
};

/** Options of `attach`: the caller gives up (a request ended, the process shuts down). */
export type AttachOptions = { signal?: AbortSignal };

/** Options of `create`: each step it reports is recorded as a workspace event. */
export type CreateOptions = { onProgress?: (progress: CreateProgress) => void };

/**
 * One configured backend of this installation: its facts, each stated once, and the operations on its
 * machines. Every operation that acts on a machine the workers own (create, stop, purge, reap) is
 * idempotent, since a job may run again after a crash, and receives the spec with the stored handle.
 *
 * Capabilities beyond these (warm pools: `capabilities.warmPool` and the pool operations below) are added
 * HERE, as optional operations next to their facts in `capabilities`, so every driver states whether it
 * has them and the engine never checks `kind`.
 */
export interface WorkspaceDriver {
  /** The registry name (`local`, `host-unconfined`, `docker`, ...): what operators configure. */
  readonly name: string;
  /** What the workspace record stores; drivers that share a kind share machines (local ↔ host-unconfined). */
  readonly kind: BackendKind;
  /** One line for operators: what this backend is and when to choose it. */
  readonly summary: string;
  /** Data survives `stop` and a later `create` of the same spec. */
  readonly persistent: boolean;
  readonly isolation: DriverIsolation;
  readonly capabilities: DriverCapabilities;

  // ── the workers' operations ───────────────────────────────────────────────────────────────────────

  /**
   * Creates or restarts the machine and leaves it running; returns the handle to store (no secrets). The
   * workers' `workspace.provision` job is the only caller: the API process never creates machines.
   */
  create(spec: WorkspaceSpec, options?: CreateOptions): Promise<BackendHandle>;
  /** Stops the machine, keeping its data. */
  stop(spec: WorkspaceSpec): Promise<void>;
  /**
   * Deletes the machine and its data; returns what it deleted (for the purge receipt). Host folders are
   * deleted in yielding batches (host-tree-deleter.ts) that stop at `signal` and report `onProgress`;
   * running purge again finishes a stopped one.
   */
  purge(spec: WorkspaceSpec, options?: MachineDeletionOptions): Promise<string[]>;
  /** Whether the machine's data/resource still exists (reconcile: records whose resources vanished). */
  exists(spec: WorkspaceSpec): Promise<boolean>;
  /** Every resource under Berth's paths/labels/metadata (reconcile: resources without a record). */
  listResources(): Promise<MachineResource[]>;
  /** Deletes one resource found by `listResources` (an orphan); `options` as for `purge`. */
  reap(resource: MachineResource, options?: MachineDeletionOptions): Promise<void>;
  /**
   * The machine's resource use now (machine-usage.ts), or null when it is not running. Absent: the backend
   * can tell none of it (the dashboard says so instead of charting zeros).
   */
  usage?(spec: WorkspaceSpec): Promise<MachineUsage | null>;
  /**
   * Removes machine images nothing needs any more (Docker: workspace images of an earlier Berth or config
   * that no container uses); returns what it removed, or would remove on a dry run. Absent: nothing to do.
   */
  pruneImages?(options: { dryRun: boolean }): Promise<string[]>;

  // ── warm pools (where `capabilities.warmPool`; the workers' pool jobs and provisions call them) ──────
  // A pooled machine is made with NO identity (no tenant, user or workspace in its name, labels, folder or
  // env) and gets one when a first use claims it: `bindIdleMachine` moves the identity in. A bound machine
  // is a workspace's like any other and never goes back to a pool, so nothing of one tenant can reach
  // another through it.

  /**
   * What every machine made now has baked in (image, limits, the driver's config), as a short digest: a
   * machine of another key (made before the config changed) is never bound; the pool discards it.
   */
  warmPoolKey?(): Promise<string>;
  /**
   * Creates and starts one identity-free machine named by `id` (the pool row's id: letters, digits and
   * `-`), ready for a first command; returns its handle. Idempotent per id (a refill run again after a
   * crash finishes or reuses the half-made one).
   */
  createIdleMachine?(id: string, options?: CreateOptions): Promise<BackendHandle>;
  /**
   * Gives the idle machine `id` (with the handle `createIdleMachine` returned) to the workspace of `spec`,
   * which has no machine and no data yet: the machine's folder or volume becomes the workspace's, and
   * every later operation on `spec` (with the returned handle stored as `spec.handle`) finds it: attach,
   * stop, purge, exists, usage, listResources. Fast: no image, container or sandbox is created here.
   * Rejects when the machine cannot be bound (gone, or the workspace has data already); the caller then
   * discards it and creates a machine the usual way.
   */
  bindIdleMachine?(id: string, handle: BackendHandle, spec: WorkspaceSpec): Promise<BackendHandle>;
  /**
   * Deletes an unbound pool machine (idle, half made, or claimed but never bound). Idempotent. Never
   * deletes what a bound workspace owns: once bound, a machine is deleted only by `purge`.
   */
  discardIdleMachine?(id: string, handle: BackendHandle | null): Promise<void>;
  /** The ids of every unbound pool machine this installation has on the backend (reconcile). */
  listIdleMachines?(): Promise<string[]>;

  // ── every process' operations ─────────────────────────────────────────────────────────────────────

  /**
   * The live machine of a workspace the workers created, with `spec.handle` (the reattach key). Creates
   * nothing (host folders excepted when there is no handle: library use), and is idempotent per spec: the
   * same spec after a restart reattaches the same data. A machine that vanished is reported with
   * `workspaceVanished()` (vanished.ts); the engine then has the workers create a new one.
   */
  attach(spec: WorkspaceSpec, options?: AttachOptions): Promise<WorkspaceMachine>;
  /** Cheap health check (the container still runs, the sandbox has not expired). Never throws. */
  isAlive(machine: WorkspaceMachine): Promise<boolean>;
  /**
   * Lets go of this process' hold on the machine (connections, streams, tunnels) and leaves it running for
   * every other process: what a cache eviction and a closed Workspace do. Never stops the machine.
   */
  detach(machine: WorkspaceMachine): Promise<void>;
  /**
   * How MCP declarations become live clients: through the in-sandbox gateway. Absent: MCP servers run on
   * the host (LocalMcpConnector), which only the host-unconfined driver does (an isolated workspace
   * without it is refused).
   */
  connectMcp?(
    machine: WorkspaceMachine,
    /** Where HTTP/SSE servers dialled from the HOST may point (mcp-network-policy.ts). Default: public only. */
    options?: { network: McpNetworkPolicy },
  ): Promise<McpConnector>;

  // ── the driver itself ─────────────────────────────────────────────────────────────────────────────

  /**
   * Checks at boot that the backend works on this machine as configured (bubblewrap runs, the Docker
   * socket answers, the API key is accepted), so `npm start` refuses with a reason instead of failing at
   * the first turn. Absent: nothing to check.
   */
  probe?(): Promise<DriverProbe>;
  /** Releases what the driver holds process-wide (clients, sockets). Idempotent. */
  close?(): Promise<void>;
}

/** What a definition's `create` builds: the driver without the facts its definition states already. */
export type DriverImplementation = Omit<WorkspaceDriver, "name" | "kind" | "summary">;

/** A live machine and the driver that attached it (whose facts and operations apply to it). */
export type AttachedMachine = { driver: WorkspaceDriver; machine: WorkspaceMachine };

/**
 * How a Workspace gets its live machine, in any process: one driver (`attachThrough`), or the engine's
 * attacher, which routes by the workspace record's kind after the workers created the machine.
 */
export interface MachineAttacher {
  attach(spec: WorkspaceSpec, options?: AttachOptions): Promise<AttachedMachine>;
  /** Some of its machines can vanish behind Berth's back: cache hits re-check liveness by default. */
  readonly mayVanish: boolean;
}

/** The attacher of one driver (library use and tests: one backend, no workers). */
export function attachThrough(driver: WorkspaceDriver): MachineAttacher {
  return {
    mayVanish: driver.capabilities.mayVanish,
    attach: async (spec, options) => ({ driver, machine: await driver.attach(spec, options) }),
  };
}

/** A boot check's answer: what works (for the startup log) or why not and what to do about it. */
type DriverProbe = { ok: true; summary: string } | { ok: false; reason: string; hint: string };

/** Where a driver keeps host-side state, shared by every driver of the installation. */
export type DriverContext = {
  /** BERTH_WORKSPACE_BASEDIR, absolute. */
  basedir: string;
  /** The process' working directory (relative paths in config resolve against it). */
  cwd: string;
  /** The uid Berth runs as (-1 where there are none): a driver may refuse root. */
  uid: number;
  /**
   * This installation's id (see backend/installation.ts): drivers whose resources live on an engine other
   * installations may share label them with it and reconcile only their own. Absent: such a driver fails
   * when it first needs it.
   */
  installationId?: InstallationIdSource;
  /**
   * Tenants' own settings of a backend (an E2B team's API key and template), stored by the installation with
   * secrets decrypted here. Absent, or null for a tenant: the installation's configuration applies.
   */
  tenantSettings?: TenantDriverSettings;
};

/**
 * A backend's per-tenant settings, declared by its driver: the backend-settings module stores, audits and
 * shows them for any driver that declares some (admins, Settings page), and hands them back to the driver
 * through `DriverContext.tenantSettings`.
 */
export type TenantSettingsDeclaration = {
  /**
   * Every field optional (absent: the installation's value), strict. Each field's `.meta({ title })` names
   * it on the settings card; strings and integers are what the card can edit.
   */
  readonly schema: z.ZodObject;
  /** The one secret field (sealed with BERTH_ENCRYPTION_KEY, never read back: only its last four characters). */
  readonly secretField?: string;
  /** The settings card's title and description. */
  readonly title: string;
  readonly description: string;
};

/** Where a driver reads tenants' settings of its backend (raw: each driver validates its own fields). */
export type TenantDriverSettings = {
  forTenant(backend: BackendKind, tenantId: string): Promise<Record<string, unknown> | null>;
  /** The tenants that have settings of `backend` (reconcile lists their teams' resources too). */
  tenants(backend: BackendKind): Promise<string[]>;
};

/**
 * A backend as the registry knows it: how to read its configuration from the environment (only variables of
 * its own, validated with its own schema; clear messages at boot) and how to build the driver from it.
 */
export type DriverDefinition<Config = unknown> = {
  readonly name: string;
  /**
   * What workspace records store (text, any value of the form `ZBackendKind` checks: backend/kind.ts), the
   * metering ledger's backend key (BERTH_METERING_RATES) and the dashboard's filter value. The registry is
   * the only list of kinds: a new one needs no migration and no list elsewhere.
   */
  readonly kind: BackendKind;
  /** One line for operators: what this backend is and when to choose it. */
  readonly summary: string;
  /** How the dashboard names this backend (lists, filters, the settings cards). */
  readonly label: string;
  /** What `{backend}` says in the workspace instructions: "You have access to a Docker-based workspace". */
  readonly instructionsLabel: string;
  /** What a tenant may set of this backend for its own workspaces (its own E2B team). Absent: nothing. */
  readonly tenantSettings?: TenantSettingsDeclaration;
  readonly configSchema: z.ZodType<Config>;
  /** Reads this driver's variables from `env` into config input (validated with `configSchema`). */
  configFromEnv(env: Readonly<Record<string, string | undefined>>, context: DriverContext): unknown;
  /** Builds the driver's operations and config-dependent facts (`instantiateDriver` adds the rest). */
  create(config: Config, context: DriverContext): DriverImplementation;
};

/** Any driver definition, whatever its config type: what a registry holds. */
export type AnyDriverDefinition = Omit<DriverDefinition, "create"> & {
  create(config: never, context: DriverContext): DriverImplementation;
};

/** The driver of a definition over a config its own schema produced: its facts stated once, here. */
export function instantiateDriver<Config>(
  definition: DriverDefinition<Config>,
  config: Config,
  context: DriverContext,
): WorkspaceDriver {
  const { name, kind, summary } = definition;
  return { ...definition.create(config, context), name, kind, summary };
}
