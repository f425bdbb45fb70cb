import { hasVanished } from "@/server/workspace/drivers/vanished";
import path from "node:path";
import type { Readable } from "node:stream";
import { AppError } from "@/server/shared/errors";
import type { BackendKind, WorkspaceMachine } from "@/server/workspace/drivers/port";
import {
  DEFAULT_WORKSPACE_INSTRUCTIONS,
  renderInstructions,
  validateInstructionsTemplate,
} from "./instructions";
import { LAYOUT_DIRECTORIES, WORKSPACE_LAYOUT } from "./layout";
import { AsyncMutex } from "./mcp/async-mutex";
import { LocalMcpConnector } from "./mcp/local-connector";
import { McpRegistry, type McpRegistryStats } from "./mcp/mcp-registry";
import type { McpStatus } from "./mcp/mcp-status";
import { seedAgentSkills, type SeedSkill } from "./skills/agent-seed";
import {
  createMcpAddressGuard,
  DEFAULT_MCP_NETWORK_POLICY,
  type McpNetworkPolicy,
} from "./mcp/mcp-network-policy";
import {
  silentLogger,
  type EngineLogger,
  type LiveMcpClient,
  type McpConnector,
  type McpScope,
  type McpToolDescriptor,
  type TMcpDeclaration,
} from "./mcp/types";
import { Offloader, type DataBlock, type OffloadMessage, type ToolResultOutput } from "./offload/offloader";
import type { MachineAttacher, WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { ArchiveFormat } from "./archive/archive-entries";
import type { ArchiveLimits } from "./archive/extract-to-machine";
import {
  SkillStore,
  type SkillInstallResult,
  type SkillListing,
  type Skill,
  type SkillRef,
} from "./skills/skill-store";
import { createBuiltinTools, type BuiltinTool, type BuiltinToolsOptions } from "./tools";

export type WorkspaceOptions = {
  spec: WorkspaceSpec;
  /** Where the workspace's live machine comes from (one driver, or the engine's attacher over all). */
  attacher: MachineAttacher;
  /** Template for every MCP scope that never diverged (agentscope-spec.md §2.1). */
  defaultMcps?: readonly TMcpDeclaration[];
  /** Cap on live stateful MCP instances; null/0 → max(40, 2 × stateful defaults). */
  maxLiveStatefulMcps?: number | null;
  /** Host folders holding SKILL.md, seeded into `skills/.seed` on initialise. */
  skillPaths?: readonly string[];
  /** Archive install limits (unset fields: 500 MiB expanded, 10,000 entries, 500 MiB archive). */
  skillArchiveLimits?: Partial<ArchiveLimits>;
  /** Custom instructions template; only {backend} and {workdir} placeholders (checked here). */
  instructionsTemplate?: string;
  /**
   * What `{backend}` says for a backend kind (its driver definition's `instructionsLabel`, "Docker-based").
   * Absent: the kind itself.
   */
  instructionsLabel?: (kind: string) => string;
  /** Overrides the driver's MCP connector (tests, or a custom gateway). */
  mcpConnector?: McpConnector;
  /**
   * Where `http_mcp` declarations may point (mcp/mcp-network-policy.ts): checked when one is added, and on
   * every connection Berth's host makes. Unset → no non-public address is allowed.
   */
  mcpNetwork?: McpNetworkPolicy;
  logger?: EngineLogger;
};

type Live = { machine: WorkspaceMachine; driver: WorkspaceDriver; mcp: McpRegistry; skills: SkillStore };

/**
 * One agent workspace: a live machine from its driver plus the layout (`.mcp`, `data/`, `skills/.seed` and
 * partitions, `sessions/<sid>/`), the builtin tools, MCP scopes, skills and offload. Create it, `initialize()`
 * it (idempotent; concurrent calls share one run), use it, `close()` it — or `await using`.
 */
export class Workspace implements AsyncDisposable {
  readonly id: string;
  readonly spec: WorkspaceSpec;
  private readonly attacher: MachineAttacher;
  private readonly options: WorkspaceOptions;
  private readonly logger: EngineLogger;
  private readonly template: string;
  private readonly mcpAddressGuard: ReturnType<typeof createMcpAddressGuard>;
  private live: Live | null = null;
  private readonly lifecycle = new AsyncMutex();
  private readonly offloader = new Offloader(() => this.machine);

  constructor(options: WorkspaceOptions) {
    this.spec = { ...options.spec };
    this.id = options.spec.workspaceId;
    this.attacher = options.attacher;
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.template = options.instructionsTemplate ?? DEFAULT_WORKSPACE_INSTRUCTIONS;
    this.mcpAddressGuard = createMcpAddressGuard(options.mcpNetwork ?? DEFAULT_MCP_NETWORK_POLICY);
    validateInstructionsTemplate(this.template);
  }

  // ── lifecycle ──────────────────────────────────────────────────────────────────────────────────────

  /** Provisions the backend, lays out the folders and restores `.mcp`. No MCP server starts here. */
  initialize(): Promise<void> {
    if (this.live) return Promise.resolve();
    return this.serialise(async () => {
      if (this.live) return;
      const { driver, machine: machine } = await this.attacher.attach(this.spec);
      try {
        await Promise.all(
          LAYOUT_DIRECTORIES.map((dir) => machine.mkdir(path.posix.join(machine.workdir, dir))),
        );
        const connector = this.options.mcpConnector ?? (await this.connectorFor(driver, machine));
        const mcp = this.createMcpRegistry(driver, machine, connector);
        await mcp.restore();
        const skills = this.createSkillStore(machine, this.options.skillPaths ?? []);
        await skills.initialize();
        this.live = { machine, driver, mcp, skills };
      } catch (error) {
        // Half-initialised: let go of the machine (it keeps running, data kept) so nothing leaks, then report.
        await driver.detach(machine).catch((detachError: unknown) => {
          this.logger.warn(
            { workspaceId: this.id, error: String(detachError) },
            "Detaching after a failed initialise failed",
          );
        });
        throw error;
      }
    });
  }

  /**
   * Lets go of MCP instances (local ones close; a sandbox's gateway keeps its servers for the other
   * processes attached to it, and they go with the sandbox) and releases the backend; declarations and
   * files stay. Idempotent.
   */
  close(): Promise<void> {
    return this.serialise(async () => {
      const live = this.live;
      if (!live) return;
      this.live = null;
      await live.mcp.releaseAll().catch((error: unknown) => {
        this.logger.warn({ workspaceId: this.id, error: String(error) }, "Closing MCP instances failed");
      });
      await live.driver.detach(live.machine);
    });
  }

  /**
   * Wipes the workspace's managed state: MCP instances and declarations (scopes get the defaults again),
   * `.mcp`, `skills/` (the seed too: skill paths are not re-seeded, as in the reference), `sessions/`, `data/`.
   * The backend stays up; project files the agent made elsewhere in the workdir are kept.
   */
  reset(): Promise<void> {
    return this.serialise(async () => {
      const live = this.requireLive();
      await live.mcp.closeAll();
      const { machine, driver } = live;
      const managed = [
        WORKSPACE_LAYOUT.mcpFile,
        WORKSPACE_LAYOUT.skillsDir,
        WORKSPACE_LAYOUT.sessionsDir,
        WORKSPACE_LAYOUT.dataDir,
      ];
      await Promise.all(managed.map((entry) => machine.remove(path.posix.join(machine.workdir, entry))));
      await Promise.all(
        LAYOUT_DIRECTORIES.map((dir) => machine.mkdir(path.posix.join(machine.workdir, dir))),
      );
      // As in the reference, skill paths are not re-seeded: the seed starts empty after a reset.
      const skills = this.createSkillStore(machine, []);
      await skills.initialize();
      const connector = await this.connectorFor(driver, machine);
      this.live = { machine, driver, mcp: this.createMcpRegistry(driver, machine, connector), skills };
    });
  }

  /** Initialised and, for its driver, still running (a sandbox may have expired underneath us). */
  async isAlive(): Promise<boolean> {
    const live = this.live;
    if (!live) return false;
    // Host folders are stopped and deleted only by Berth's jobs, so their liveness is not polled; one
    // deleted outside Berth is noticed on use (the machine is marked vanished) and checked then.
    if (!live.driver.capabilities.mayVanish && !hasVanished(live.machine)) return true;
    return live.driver.isAlive(live.machine).catch(() => false);
  }

  /** True when files survive a stop and a later attach (host folders, bind mounts, volumes). */
  isPersistent(): boolean {
    return this.requireLive().driver.persistent;
  }

  /**
   * An operation found this workspace's files gone (see backend/vanished.ts): the manager re-checks its
   * liveness on the next use, whatever its interval (no driver call).
   */
  get vanished(): boolean {
    return this.live !== null && hasVanished(this.live.machine);
  }

  /** Whether `initialize` has completed and `close` has not run since (no driver call). */
  get isInitialized(): boolean {
    return this.live !== null;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** The live backend. Throws AppError UNAVAILABLE before `initialize` or after `close`. */
  get machine(): WorkspaceMachine {
    return this.requireLive().machine;
  }

  get workdir(): string {
    return this.machine.workdir;
  }

  /** The backend kind of the workspace's machine (its driver's: the machine repeats no facts). */
  get kind(): BackendKind {
    return this.requireLive().driver.kind;
  }

  /** Sandboxed backends confine commands; host-unconfined does not (trusted agents only). */
  get isolated(): boolean {
    return this.requireLive().driver.isolation.isolated;
  }

  // ── prompt and tools ───────────────────────────────────────────────────────────────────────────────

  getInstructions(): string {
    const { machine, driver } = this.requireLive();
    const label = this.options.instructionsLabel?.(driver.kind) ?? driver.kind;
    return renderInstructions(this.template, label, machine.workdir);
  }

  /** Bash, Edit, Glob, Grep, Read, Write bound to this workspace's backend. */
  listTools(options?: BuiltinToolsOptions): BuiltinTool[] {
    return createBuiltinTools(this.machine, options);
  }

  // ── MCP (agentscope-spec.md §2; "" is the legacy agent/session id) ─────────────────────────────────

  /** Live clients of the scope, started lazily; an MCP that fails to start is left out and retried next time. */
  async listMcps(scope: McpScope): Promise<LiveMcpClient[]> {
    return this.requireLive().mcp.list(scope);
  }

  /** The scope's MCP tools (`mcp__<mcp>__<tool>`), ready for an LLM toolkit. */
  async listMcpTools(scope: McpScope): Promise<McpToolDescriptor[]> {
    return this.requireLive().mcp.tools(scope);
  }

  /**
   * The MCP tools of a session's turn: its own scope's plus the agent's shared scope (agentId, ""), so an
   * MCP added for the agent reaches all its sessions; the session's own declaration wins a name clash.
   */
  async listSessionMcpTools(scope: McpScope): Promise<McpToolDescriptor[]> {
    return this.requireLive().mcp.sessionTools(scope);
  }

  /**
   * The MCP servers running now for a session's turn (its own scope's and the agent's shared scope's),
   * starting none.
   */
  runningMcps(scope: McpScope): string[] {
    const live = this.requireLive().mcp;
    const names = [...live.running(scope), ...live.running({ agentId: scope.agentId, sessionId: "" })];
    return [...new Set(names)].sort();
  }

  /** Live instance counts and the cap on live stateful ones (BERTH_MAX_LIVE_STATEFUL_MCPS). */
  mcpStats(): McpRegistryStats {
    return this.requireLive().mcp.stats();
  }

  /** Each declared MCP of the scope with its state (running, failed with the error, stopped) and tools. */
  async mcpStatus(scope: McpScope): Promise<Array<McpStatus & { tools: McpToolDescriptor[] }>> {
    return this.requireLive().mcp.status(scope);
  }

  /**
   * An agent's own defaults (its stored configuration), applied to its scopes in this workspace: `mcps`
   * replace the workspace's default MCPs for every scope of the agent that never diverged (null: the
   * workspace's defaults apply), and `skills`
   * are seeded once into its skill partition (a seeded skill the agent removes stays removed).
   */
  async setAgentDefaults(
    agentId: string,
    defaults: { mcps: readonly TMcpDeclaration[] | null; skills: readonly SeedSkill[] },
  ): Promise<void> {
    const live = this.requireLive();
    live.mcp.setAgentDefaults(agentId, defaults.mcps);
    if (defaults.skills.length > 0)
      await seedAgentSkills(live.skills, live.machine, agentId, defaults.skills);
  }

  /**
   * Declarations of the scope (its own once diverged, else copies of the defaults) as this process last
   * saw them; `readMcpDeclarations` first takes in what other processes changed in `.mcp`.
   */
  getMcpDeclarations(scope: McpScope): TMcpDeclaration[] {
    return this.requireLive().mcp.declarations(scope);
  }

  /** Declarations of the scope as the workspace has them now (other API replicas' and workers' changes). */
  readMcpDeclarations(scope: McpScope): Promise<TMcpDeclaration[]> {
    return this.requireLive().mcp.currentDeclarations(scope);
  }

  /** Declares, starts and persists an MCP; returns its live client. CONFLICT on a duplicate name. */
  async addMcp(declaration: TMcpDeclaration, scope: McpScope): Promise<LiveMcpClient> {
    const live = this.requireLive();
    if (declaration.mcp_config.type === "http_mcp") {
      await this.mcpAddressGuard.assertUrlAllowed(declaration.mcp_config.url);
    }
    return live.mcp.add(declaration, scope);
  }

  /** Undeclares and closes an MCP (stateless ones too). NOT_FOUND when it is not declared in the scope. */
  async removeMcp(name: string, scope: McpScope): Promise<void> {
    return this.requireLive().mcp.remove(name, scope);
  }

  // ── skills (agentscope-spec.md §3; agentId null/undefined → the "default" partition) ──────────────

  /** The skill store itself, for operations not mirrored below. */
  get skills(): SkillStore {
    return this.requireLive().skills;
  }

  /** The agent's skills (its partition is equipped from the seed on first use). */
  async listSkills(agentId?: string | null): Promise<SkillListing> {
    return this.requireLive().skills.list(agentId);
  }

  /** One skill with its SKILL.md text. NOT_FOUND when unknown. */
  async readSkill(ref: SkillRef, agentId?: string | null): Promise<{ skill: Skill; content: string }> {
    return this.requireLive().skills.read(ref, agentId);
  }

  /** Installs a skill folder from the host. */
  async addSkill(
    hostPath: string,
    agentId?: string | null,
    options?: { dirName?: string },
  ): Promise<SkillInstallResult> {
    return this.requireLive().skills.installFromDirectory(hostPath, agentId, options);
  }

  /** Installs a skill from a zip/tar/tar.gz stream, never held whole in memory; hostile archives are refused. */
  async addSkillArchive(
    stream: Readable,
    format: ArchiveFormat,
    agentId?: string | null,
    options?: { dirName?: string; limits?: Partial<ArchiveLimits> },
  ): Promise<SkillInstallResult> {
    return this.requireLive().skills.installArchive(stream, format, agentId, options);
  }

  /** Deletes a skill by folder, or by a name only one skill answers to (else CONFLICT). NOT_FOUND when unknown. */
  async removeSkill(ref: SkillRef, agentId?: string | null): Promise<{ dir: string }> {
    return this.requireLive().skills.remove(ref, agentId);
  }

  // ── offload (agentscope-spec.md §4) ───────────────────────────────────────────────────────────────

  /** Appends messages to `sessions/<sid>/context.jsonl`; returns its `workspace:///` reference. */
  async offloadContext(sessionId: string, messages: readonly OffloadMessage[]): Promise<string> {
    this.requireLive();
    return this.offloader.offloadContext(sessionId, messages);
  }

  /** Writes `sessions/<sid>/tool_result-<id>.txt` (or `(n)`); returns its `workspace:///` reference. */
  async offloadToolResult(sessionId: string, toolCallId: string, output: ToolResultOutput): Promise<string> {
    this.requireLive();
    return this.offloader.offloadToolResult(sessionId, toolCallId, output);
  }

  /** Stores a base64 block under `data/<sha256><ext>` and returns it as a `workspace:///data/...` URL block. */
  async offloadDataBlock(block: DataBlock): Promise<DataBlock> {
    this.requireLive();
    return this.offloader.offloadDataBlock(block);
  }

  /** Streams the file behind any `workspace:///` reference (confined to the workdir). */
  async resolveReference(reference: string): Promise<Readable> {
    this.requireLive();
    return this.offloader.open(reference);
  }

  // ── purge (agentscope-spec.md §5, fixing #2288) ───────────────────────────────────────────────────

  /**
   * Forgets a session: its MCP scopes (of every agent, so a team's worker scopes go too, unless `agentId`
   * narrows it) with their instances and declarations, and `sessions/<sid>/`.
   */
  async purgeSession(input: { sessionId: string; agentId?: string }): Promise<void> {
    const live = this.requireLive();
    await live.mcp.purgeSession(
      input.sessionId,
      input.agentId === undefined ? {} : { agentId: input.agentId },
    );
    if (input.sessionId !== "") await this.offloader.purgeSession(input.sessionId);
  }

  /** Forgets an agent: its MCP scopes in every session and its skill partition. */
  async purgeAgent(input: { agentId: string }): Promise<void> {
    const live = this.requireLive();
    await live.mcp.purgeAgent(input.agentId);
    await live.skills.purgeAgent(input.agentId);
  }

  // ── internals ──────────────────────────────────────────────────────────────────────────────────────

  private requireLive(): Live {
    if (!this.live) {
      throw new AppError("UNAVAILABLE", `Workspace ${this.id} is not initialised`, {
        userMessage: "The workspace is not running; try again",
        details: { workspaceId: this.id },
      });
    }
    return this.live;
  }

  /** Lifecycle changes run one at a time, so close never races a half-done initialise. */
  private serialise(task: () => Promise<void>): Promise<void> {
    return this.lifecycle.run(task);
  }

  private async connectorFor(driver: WorkspaceDriver, machine: WorkspaceMachine): Promise<McpConnector> {
    const network = this.options.mcpNetwork ?? DEFAULT_MCP_NETWORK_POLICY;
    if (driver.connectMcp) return driver.connectMcp(machine, { network });
    if (driver.isolation.isolated) {
      // Running a sandboxed workspace's MCP servers on the host would escape the sandbox.
      throw new AppError(
        "INTERNAL",
        `The ${driver.name} driver has no MCP connector for an isolated workspace`,
      );
    }
    return new LocalMcpConnector({
      defaultCwd: machine.workdir,
      logger: this.logger,
      network: this.options.mcpNetwork ?? DEFAULT_MCP_NETWORK_POLICY,
    });
  }

  private createSkillStore(machine: WorkspaceMachine, seedPaths: readonly string[]): SkillStore {
    return new SkillStore({
      machine,
      seedPaths,
      ...(this.options.skillArchiveLimits ? { limits: this.options.skillArchiveLimits } : {}),
      logger: this.logger,
    });
  }

  private createMcpRegistry(
    driver: WorkspaceDriver,
    machine: WorkspaceMachine,
    connector: McpConnector,
  ): McpRegistry {
    return new McpRegistry({
      connector,
      defaultMcps: this.options.defaultMcps ?? [],
      maxLiveStatefulMcps: this.options.maxLiveStatefulMcps ?? null,
      ...(driver.persistent
        ? { persistence: { machine, path: path.posix.join(machine.workdir, WORKSPACE_LAYOUT.mcpFile) } }
        : {}),
      logger: this.logger,
    });
  }
}
