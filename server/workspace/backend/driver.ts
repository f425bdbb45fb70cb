import type { InstallationIdSource } from "./installation";
import type { z } from "zod";
import type { McpNetworkPolicy } from "@/server/workspace/mcp/mcp-network-policy";
import type { IsolationPolicy } from "@/server/workspace/manager/isolation";
import type { McpConnector } from "@/server/workspace/mcp/types";
import type { MachineUsage } from "./machine-usage";
import type { BackendKind, WorkspaceBackend } from "./port";

/**
 * The driver seam: everything one backend (a folder under server/workspace/backends/) gives Berth. A driver
 * is three objects over one config:
 *   - the WorkspaceBackend (port.ts): exec, files and archives of one live workspace;
 *   - the BackendProvider: how any process (API or worker) ATTACHES to a provisioned machine;
 *   - the MachineController: what the WORKERS do to machines (provision, stop, purge, exists, list, reap).
 * What differs between backends is stated once, in `capabilities`, never by checking `kind`.
 * The registry (server/workspace/backends/registry.ts) maps a driver name to its DriverDefinition.
 */

/**
 * What a provision returned and the workspace record stores (`backendHandle`): the REATTACH KEY. Backends
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
  /** The stored handle of the last provision (null or absent before the first one, and after a purge). */
  handle?: BackendHandle | null;
  /**
   * The tenant's per-workspace resource quotas, for the machine a provision creates. Docker lowers its
   * CPU and memory limits to them; Kubernetes uses them as the Pod's CPU and memory limits and the claim's
   * size; the host-folder backends and E2B ignore them. Absent fields leave the backend's own setting.
   */
  resources?: WorkspaceResources;
};

export type WorkspaceResources = { cpus?: number; memoryBytes?: number; diskBytes?: number };

/** What a backend can and cannot do, for the engine, the API and the dashboard. */
export type DriverCapabilities = {
  /** Agent commands cannot reach the host (false only for `host-unconfined`: trusted agents only). */
  readonly isolated: boolean;
  /** Data survives `stop` and a later provision of the same spec. */
  readonly persistent: boolean;
  /** The backend's files are this host's files (WorkspaceBackend.hostPath works; bulk writes go direct). */
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
  /** The backend offers `openPty` (an interactive terminal inside the same confinement as `exec`). */
  readonly pty: boolean;
};

/**
 * What the installation's backend confines, for the API and the dashboard: `isolated` is false when agent
 * commands run on the host with Berth's privileges (`host-unconfined`, trusted agents only).
 */
type BackendIsolation = {
  /** The driver name (`local`, `host-unconfined`, `docker`, `e2b`, `kubernetes`). */
  backend: string;
  isolated: boolean;
  /** The sandbox technology, when there is one besides the backend itself ("bubblewrap"). */
  sandbox: string | null;
};

/**
 * How a Workspace gets (and gives back) the machine it runs on, in ANY process. `provision` attaches: it
 * creates nothing that the workers did not provision (or, for host folders, makes the same folder), and is
 * idempotent per spec: the same spec after a restart reattaches the same data.
 */
export interface BackendProvider {
  readonly kind: BackendKind;
  /** True when data survives `teardown({ purge: false })` and a later `provision` of the same spec. */
  readonly persistent: boolean;
  /**
   * The machine can disappear behind Berth's back, so cache hits re-check `isAlive` (see
   * DriverCapabilities.mayVanish). Absent: true.
   */
  readonly mayVanish?: boolean;
  /** Attaches to (or, for host folders, opens) the workspace's machine and returns a ready backend. */
  provision(spec: WorkspaceSpec, options?: { signal?: AbortSignal }): Promise<WorkspaceBackend>;
  /** Cheap health check (the container still runs, the sandbox has not expired). Never throws. */
  isAlive(backend: WorkspaceBackend): Promise<boolean>;
  /**
   * Releases the machine: stops/pauses it; with `purge`, deletes its data too (used when provisioning
   * failed half-way or the workspace is deleted). Idempotent, safe on a dead backend.
   */
  teardown(backend: WorkspaceBackend, options: { purge: boolean }): Promise<void>;
  /**
   * Releases only this process' hold on the machine (connections, streams, handles) and leaves it running
   * for every other process: what a cache eviction does. Absent: `backend.close()` is already that.
   */
  detach?(backend: WorkspaceBackend): Promise<void>;
  /**
   * How MCP declarations become live clients for this backend: sandboxed providers route through their
   * in-sandbox gateway. Omitted or null: MCP servers run on the host (LocalMcpConnector), which only the
   * host-unconfined driver does (an isolated backend without a connector is refused).
   */
  createMcpConnector?(
    backend: WorkspaceBackend,
    spec: WorkspaceSpec,
    /** Where HTTP/SSE servers dialled from the HOST may point (mcp-network-policy.ts). */
    options?: { network: McpNetworkPolicy },
  ): Promise<McpConnector | null> | undefined;
}

/** A backend resource (folder, container, sandbox, Pod) that carries Berth's naming, found by `listResources`. */
export type MachineResource = {
  /** Decoded from the resource's name or labels; null when it cannot be decoded (hashed names). */
  workspaceId: string | null;
  tenantId: string | null;
  /** What an operator would look for: the folder path, the container name, the sandbox id. */
  locator: string;
};

/** One step of a machine's provisioning (image build lines, container created, gateway ready, ...). */
export type ProvisionProgress = {
  step: string;
  detail?: string | undefined;
  /** The step found the machine's files gone (recorded as a `data_lost` event, not a provisioning step). */
  dataLost?: boolean;
};

/**
 * What the WORKERS do to a workspace's machine. The API process never calls these: it only attaches
 * (BackendProvider.provision on an already-provisioned machine). Every method is idempotent, since a job may
 * run again after a crash, and receives the spec with the stored handle.
 */
export interface MachineController {
  readonly kind: BackendKind;
  /** Creates or restarts the machine and leaves it running; returns the handle to store (no secrets). */
  provision(
    spec: WorkspaceSpec,
    options?: { onProgress?: (progress: ProvisionProgress) => void },
  ): Promise<BackendHandle>;
  /** Stops the machine, keeping its data. */
  stop(spec: WorkspaceSpec): Promise<void>;
  /** Deletes the machine and its data; returns what it deleted (for the purge receipt). */
  purge(spec: WorkspaceSpec): Promise<string[]>;
  /** Whether the machine's data/resource still exists (reconcile: records whose resources vanished). */
  exists(spec: WorkspaceSpec): Promise<boolean>;
  /** Every resource under Berth's paths/labels/metadata (reconcile: resources without a record). */
  listResources(): Promise<MachineResource[]>;
  /** Deletes one resource found by `listResources` (an orphan). */
  reap(resource: MachineResource): Promise<void>;
  /**
   * Removes machine images nothing needs any more (Docker: workspace images of an earlier Berth or config
   * that no container uses); returns what it removed, or would remove on a dry run. Absent: nothing to do.
   */
  pruneImages?(options: { dryRun: boolean }): Promise<string[]>;
  /**
   * The machine's resource use now (machine-usage.ts), or null when it is not running. Absent: the backend
   * can tell none of it (the dashboard says so instead of charting zeros).
   */
  usage?(spec: WorkspaceSpec): Promise<MachineUsage | null>;
}

/** One configured backend of this installation: what the engine, the workers and the API use. */
export interface WorkspaceDriver {
  /** The registry name (`local`, `host-unconfined`, `docker`, ...): what operators configure. */
  readonly name: string;
  /** What the workspace record stores; drivers that share a kind share data (local ↔ host-unconfined). */
  readonly kind: BackendKind;
  readonly capabilities: DriverCapabilities;
  readonly isolation: BackendIsolation;
  readonly provider: BackendProvider;
  readonly machine: MachineController;
  /**
   * Checks at boot that the backend works on this machine as configured (bubblewrap runs, the Docker
   * socket answers, the API key is accepted), so `npm start` refuses with a reason instead of failing at
   * the first turn. Absent: nothing to check.
   */
  probe?(): Promise<DriverProbe>;
  /** Releases what the driver holds process-wide (clients, sockets). Idempotent. */
  close?(): Promise<void>;
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
  readonly kind: BackendKind;
  /** One line for operators: what this backend is and when to choose it. */
  readonly summary: string;
  readonly configSchema: z.ZodType<Config>;
  /** Reads this driver's variables from `env` into config input (validated with `configSchema`). */
  configFromEnv(env: Readonly<Record<string, string | undefined>>, context: DriverContext): unknown;
  create(config: Config, context: DriverContext): WorkspaceDriver;
};

/** Any driver definition, whatever its config type: what a registry holds. */
export type AnyDriverDefinition = Omit<DriverDefinition, "create"> & {
  create(config: never, context: DriverContext): WorkspaceDriver;
};
