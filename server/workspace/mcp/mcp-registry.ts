import { AppError, toAppError } from "@/server/shared/errors";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { KeyedMutex } from "@/server/workspace/mcp/async-mutex";
import { toMcpAppError } from "@/server/workspace/mcp/mcp-errors";
import { MCP_FILE_NAME, scopeKey, type McpSpecs } from "@/server/workspace/mcp/mcp-file";
import { McpFileSync } from "@/server/workspace/mcp/mcp-file-sync";
import {
  countLive,
  outdatedInstances,
  pickEvictionVictim,
  type LiveInstances,
} from "@/server/workspace/mcp/mcp-capacity";
import {
  agentScopeOf,
  McpFailureLog,
  type McpState,
  type McpStatus,
} from "@/server/workspace/mcp/mcp-status";
import { mcpToolName } from "@/server/workspace/mcp/tool-filter";
import {
  silentLogger,
  ZMcpDeclaration,
  type EngineLogger,
  type LiveMcpClient,
  type McpConnector,
  type McpScope,
  type McpToolDescriptor,
  type TMcpDeclaration,
} from "@/server/workspace/mcp/types";

export type McpRegistryOptions = {
  /** Turns declarations into live clients: LocalMcpConnector on the host, the gateway connector in sandboxes. */
  connector: McpConnector;
  /** Template for every scope that has never added or removed an MCP. */
  defaultMcps?: readonly TMcpDeclaration[];
  /** Cap on live stateful instances across all scopes; null/0 → max(40, 2 × stateful defaults). */
  maxLiveStatefulMcps?: number | null;
  /** Where `.mcp` is read and written; omit for a non-persistent workspace (no file at all). */
  persistence?: { machine: WorkspaceMachine; path?: string };
  logger?: EngineLogger;
  /** Monotonic milliseconds for LRU recency; injectable so tests control the order without sleeping. */
  now?: () => number;
};

export type McpRegistryStats = {
  liveStateful: number;
  live: number;
  declaredScopes: number;
  /** The cap on live stateful instances in force. */
  cap: number;
};

/**
 * MCP declarations and live instances per (agent id, session id) scope, with the reference's rules
 * (agentscope-spec.md §2): scopes inherit fresh copies of the defaults until they diverge; instances start
 * lazily and failures are retried on the next list; a cap on live stateful instances evicts least recently
 * used scopes, never the caller's. Mutations of one scope are serialised by that scope's mutex, so a slow
 * connect in one scope never blocks another.
 */
export class McpRegistry {
  private readonly connector: McpConnector;
  private readonly defaults: readonly TMcpDeclaration[];
  private readonly cap: number;
  private readonly file: McpFileSync | null;
  private readonly logger: EngineLogger;
  private readonly now: () => number;

  private specs: McpSpecs = new Map();
  private instances: LiveInstances = new Map();
  private readonly lastUsed = new Map<string, number>();
  /** Stateful connects in flight; they count against the cap so concurrent scopes cannot overshoot it. */
  private reservedStateful = 0;
  private readonly locks = new KeyedMutex();
  private readonly closing = new Set<Promise<void>>();
  /** The agent's own default MCPs (Agent.defaultMcpConfigs): its scopes' template instead of `defaults`. */
  private readonly agentDefaults = new Map<string, readonly TMcpDeclaration[]>();
  private readonly failures = new McpFailureLog();

  constructor(options: McpRegistryOptions) {
    this.connector = options.connector;
    this.defaults = (options.defaultMcps ?? []).map((declaration) => ZMcpDeclaration.parse(declaration));
    const statefulDefaults = this.defaults.filter((declaration) => declaration.is_stateful).length;
    this.cap = options.maxLiveStatefulMcps || Math.max(40, 2 * statefulDefaults);
    this.logger = options.logger ?? silentLogger;
    this.file = options.persistence
      ? new McpFileSync(options.persistence.machine, options.persistence.path ?? MCP_FILE_NAME, this.logger)
      : null;
    this.now = options.now ?? (() => performance.now());
  }

  /**
   * Sets the default MCPs of one agent's scopes (its configured `defaultMcpConfigs`), replacing the
   * workspace-wide defaults for them; scopes that diverged keep their own list. An agent's defaults can
   * change between turns: a changed or removed default's running instance is let go.
   */
  setAgentDefaults(agentId: string, declarations: readonly TMcpDeclaration[] | null): void {
    const parsed = declarations?.map((declaration) => ZMcpDeclaration.parse(declaration)) ?? null;
    const before = this.agentDefaults.get(agentId) ?? null;
    if (JSON.stringify(before) === JSON.stringify(parsed)) return;
    const keys = [...this.instances.keys()].filter((key) => (JSON.parse(key) as [string])[0] === agentId);
    const had = new Map(keys.map((key) => [key, this.declared(key)]));
    if (parsed) this.agentDefaults.set(agentId, parsed);
    else this.agentDefaults.delete(agentId);
    for (const key of keys) {
      const wanted = new Map(this.declared(key).map((declaration) => [declaration.name, declaration]));
      const live = this.instances.get(key);
      for (const old of had.get(key) ?? []) {
        const client = live?.get(old.name);
        const next = wanted.get(old.name);
        if (!client || (next && JSON.stringify(next) === JSON.stringify(client.declaration))) continue;
        live?.delete(old.name);
        this.track(client.release ? client.release() : client.close());
      }
    }
  }

  /** Loads `.mcp` (v1 or v2) into the declared layer; call once when the workspace initialises. */
  async restore(): Promise<void> {
    if (!this.file) return;
    this.specs = await this.file.load();
  }

  /**
   * Takes in declarations another process attached to the workspace wrote to `.mcp` since this one last
   * read or wrote it (an admin added an MCP through another API replica, a worker purged a session). Live
   * instances whose declaration changed or went away are let go (a gateway's server is the other
   * process's business; a local one closes). Runs before every list and mutation: one stat when unchanged.
   */
  private async follow(): Promise<void> {
    const fresh = await this.file?.changes();
    if (!fresh) return;
    const before = this.specs;
    this.specs = fresh;
    const outdated = outdatedInstances(this.instances, (key, specs) => this.declared(key, specs), {
      before,
      after: fresh,
    });
    for (const { live, name, client } of outdated) {
      live.delete(name);
      this.track(client.release ? client.release() : client.close());
    }
  }

  /**
   * The scope's declared MCPs (copies): its own list once diverged, else the defaults; as this process
   * last saw them (`currentDeclarations` takes in other processes' changes first).
   */
  declarations(scope: McpScope): TMcpDeclaration[] {
    return structuredClone(this.declared(scopeKey(scope)));
  }

  /** The scope's declared MCPs as the workspace has them now, other processes' changes included. */
  async currentDeclarations(scope: McpScope): Promise<TMcpDeclaration[]> {
    await this.locks.run(scopeKey(scope), () => this.follow());
    return this.declarations(scope);
  }

  /**
   * Live clients of the scope in declaration order, starting missing ones; failed starts are skipped (and
   * recorded for `status`). `only` narrows which declarations are started and returned.
   */
  async list(
    scope: McpScope,
    options: { only?: (declaration: TMcpDeclaration) => boolean } = {},
  ): Promise<LiveMcpClient[]> {
    const key = scopeKey(scope);
    return this.locks.run(key, async () => {
      await this.follow();
      this.lastUsed.set(key, this.now());
      const live = this.liveMap(key);
      const declared = this.declared(key);
      for (const [name, client] of live) {
        // A crashed stdio server or a dropped stream: forget it so it is restarted below.
        if (client.declaration.is_stateful && !client.isConnected) {
          live.delete(name);
          this.track(client.close());
        }
      }
      const starts = declared
        .filter((declaration) => !live.has(declaration.name))
        .filter((declaration) => options.only?.(declaration) ?? true)
        .map((declaration) =>
          this.start(key, scope, declaration, live).then(
            () => this.failures.clear(key, declaration.name),
            (error: unknown) => {
              const message = toAppError(error).message;
              this.failures.record(key, declaration.name, message);
              this.logger.warn(
                { mcp: declaration.name, scope, error: message },
                "Failed to start MCP; skipping it until the next list",
              );
            },
          ),
        );
      await Promise.all(starts);
      return declared
        .filter((declaration) => options.only?.(declaration) ?? true)
        .flatMap((declaration) => live.get(declaration.name) ?? []);
    });
  }

  /**
   * Each declared MCP of the scope with what it is doing (see McpStatus), after starting the missing ones
   * as `list` does. Tool listing failures count as failures too (the toolkit leaves such an MCP out).
   */
  async status(scope: McpScope): Promise<Array<McpStatus & { tools: McpToolDescriptor[] }>> {
    const key = scopeKey(scope);
    const tools = await this.tools(scope);
    return this.declared(key).map((declaration) => {
      const client = this.instances.get(key)?.get(declaration.name);
      const failure = this.failures.get(key, declaration.name);
      const state: McpState = failure ? "failed" : client?.isConnected ? "running" : "stopped";
      return {
        declaration: structuredClone(declaration),
        state,
        error: failure?.error ?? null,
        failedAt: failure?.at ?? null,
        tools: state === "running" ? tools.filter((tool) => tool.mcpName === declaration.name) : [],
      };
    });
  }

  /**
   * The names of the scope's MCPs connected now, starting none: what a turn checkpoint records as running,
   * so a machine that comes back without its processes can say which servers it lost.
   */
  running(scope: McpScope): string[] {
    const live = this.instances.get(scopeKey(scope));
    return live ? [...live].filter(([, client]) => client.isConnected).map(([name]) => name) : [];
  }

  /**
   * The MCP tools a turn of a session gets: its own scope's, then those of the agent's shared scope
   * (agentId, "") that the session does not declare under the same name, so what an admin adds for the
   * agent reaches every session of it. A session's own declaration wins a name clash; the shared scope's
   * instances are shared by the sessions (the legacy "" session is just its own scope).
   */
  async sessionTools(scope: McpScope): Promise<McpToolDescriptor[]> {
    const own = await this.tools(scope);
    if (scope.sessionId === "") return own;
    const ownNames = new Set(this.declared(scopeKey(scope)).map((declaration) => declaration.name));
    const shared = await this.tools(agentScopeOf(scope), {
      only: (declaration) => !ownNames.has(declaration.name),
    });
    return [...own, ...shared];
  }

  /**
   * Declares and starts an MCP in the scope and returns its live client (unlike the reference, which
   * returned nothing: issue #2774). A name already declared in the scope is a CONFLICT; a failed start
   * records nothing.
   */
  async add(input: TMcpDeclaration, scope: McpScope): Promise<LiveMcpClient> {
    const parsed = ZMcpDeclaration.safeParse(input);
    if (!parsed.success) {
      throw new AppError("BAD_REQUEST", `Invalid MCP declaration: ${parsed.error.issues[0]?.message ?? ""}`, {
        details: {
          issues: parsed.error.issues.map((issue) => ({ path: issue.path, message: issue.message })),
        },
      });
    }
    const declaration = parsed.data;
    const key = scopeKey(scope);
    return this.locks.run(key, async () => {
      await this.follow();
      const declared = this.declared(key);
      if (declared.some((existing) => existing.name === declaration.name)) {
        throw new AppError("CONFLICT", `MCP '${declaration.name}' already exists in this scope`, {
          details: { name: declaration.name, ...scope },
        });
      }
      // Adding is activity: without this a scope that only adds looks idle and is evicted first.
      this.lastUsed.set(key, this.now());
      const live = this.liveMap(key);
      const client = await this.start(key, scope, declaration, live);
      this.failures.clear(key, declaration.name);
      // The connect may have taken a while: write on top of the file as it is now, not as it was.
      try {
        await this.change(() => {
          const others = this.declared(key).filter((existing) => existing.name !== declaration.name);
          this.specs.set(key, { scope: { ...scope }, declarations: [...others, declaration] });
          return true;
        });
      } catch (error) {
        // Not stored, so not declared: the instance started for it goes too (no process would list it).
        if (live.get(declaration.name) === client) live.delete(declaration.name);
        await client.close().catch(() => undefined);
        throw error;
      }
      return client;
    });
  }

  /** Undeclares an MCP and closes its instance, stateless ones included (reference issue #2773). */
  async remove(name: string, scope: McpScope): Promise<void> {
    const key = scopeKey(scope);
    await this.locks.run(key, async () => {
      await this.change(() => {
        const declared = this.declared(key);
        if (!declared.some((declaration) => declaration.name === name)) {
          throw new AppError("NOT_FOUND", `MCP '${name}' is not declared in this scope`, {
            details: { name, ...scope },
          });
        }
        this.specs.set(key, {
          scope: { ...scope },
          declarations: declared.filter((declaration) => declaration.name !== name),
        });
        return true;
      });
      const live = this.instances.get(key);
      const client = live?.get(name);
      live?.delete(name);
      if (client) await client.close();
    });
  }

  /**
   * The scope's MCP tools for an LLM toolkit, named `mcp__<mcp>__<tool>`. Each call looks the instance up
   * when it runs, so a client evicted or crashed since listing is restarted instead of failing the call.
   */
  async tools(
    scope: McpScope,
    options: { only?: (declaration: TMcpDeclaration) => boolean } = {},
  ): Promise<McpToolDescriptor[]> {
    const key = scopeKey(scope);
    const clients = await this.list(scope, options);
    const lists = await Promise.all(
      clients.map(async (client) => {
        try {
          const tools = await client.listTools();
          this.failures.clear(key, client.declaration.name);
          return tools.map((tool) => this.describe(scope, client.declaration.name, tool));
        } catch (error) {
          const message = toAppError(error).message;
          this.failures.record(key, client.declaration.name, `listing tools failed: ${message}`);
          this.logger.warn(
            { mcp: client.declaration.name, scope, error: message },
            "Listing MCP tools failed; leaving them out",
          );
          return [];
        }
      }),
    );
    return lists.flat();
  }

  /**
   * Forgets every scope of `sessionId` (all agents, or only `agentId` when given): closes its instances and
   * deletes its declarations, so it inherits the defaults again.
   */
  async purgeSession(sessionId: string, options: { agentId?: string } = {}): Promise<void> {
    await this.purge(
      (scope) => scope.sessionId === sessionId && (options.agentId ?? scope.agentId) === scope.agentId,
    );
  }

  /** Forgets every scope of `agentId`, in every session. */
  async purgeAgent(agentId: string): Promise<void> {
    await this.purge((scope) => scope.agentId === agentId);
  }

  /** Closes every live instance (declarations stay; instances restart lazily) and waits for pending closes. */
  closeAll(): Promise<void> {
    return this.dropAll((client) => client.close());
  }

  /**
   * Lets go of every live instance for this process: servers shared with other processes (a sandbox's
   * gateway) keep running, local ones are closed. What closing a workspace does; a reset closes them all.
   */
  releaseAll(): Promise<void> {
    return this.dropAll((client) => (client.release ? client.release() : client.close()));
  }

  private async dropAll(drop: (client: LiveMcpClient) => Promise<void>): Promise<void> {
    const all = [...this.instances.values()].flatMap((live) => [...live.values()]);
    // A fresh map: connects still in flight see their scope's map replaced and close what they opened.
    this.instances = new Map();
    this.lastUsed.clear();
    await Promise.all(all.map(drop));
    await Promise.all([...this.closing]);
  }

  stats(): McpRegistryStats {
    return {
      liveStateful: countLive(this.instances, { statefulOnly: true }),
      live: countLive(this.instances),
      declaredScopes: this.specs.size,
      cap: this.cap,
    };
  }

  private declared(key: string, specs: McpSpecs = this.specs): TMcpDeclaration[] {
    const own = specs.get(key);
    if (own) return own.declarations;
    const agentId = (JSON.parse(key) as [string, string])[0];
    return structuredClone([...(this.agentDefaults.get(agentId) ?? this.defaults)]);
  }

  private liveMap(key: string): Map<string, LiveMcpClient> {
    let live = this.instances.get(key);
    if (!live) {
      live = new Map();
      this.instances.set(key, live);
    }
    return live;
  }

  /** Connects one declaration into `live`, holding a cap slot while the connect is in flight. */
  private async start(
    key: string,
    scope: McpScope,
    declaration: TMcpDeclaration,
    live: Map<string, LiveMcpClient>,
  ): Promise<LiveMcpClient> {
    const release = this.reserveCapacity(key, declaration);
    let client: LiveMcpClient;
    try {
      client = await this.connector.connect(declaration, scope);
    } catch (error) {
      throw toMcpAppError(error, { mcp: declaration.name, phase: "connect" });
    } finally {
      release();
    }
    if (this.instances.get(key) !== live) {
      // closeAll or a purge ran meanwhile: this instance belongs to nobody.
      await client.close();
      throw new AppError("UNAVAILABLE", `MCP '${declaration.name}' was closed while it started`);
    }
    live.set(declaration.name, client);
    return client;
  }

  /**
   * The reference's capacity loop (§2.6), run synchronously so concurrent scopes see consistent counts:
   * stateless MCPs never count; while the cap is reached, close ONE stateful instance (first inserted) of
   * the least recently used other scope; if only the caller's scope holds instances, exceed the cap.
   */
  private reserveCapacity(key: string, incoming: TMcpDeclaration): () => void {
    if (!incoming.is_stateful) return () => undefined;
    for (;;) {
      if (countLive(this.instances, { statefulOnly: true }) + this.reservedStateful < this.cap) break;
      const victim = pickEvictionVictim(this.instances, key, {
        lastUsed: this.lastUsed,
        declaredNames: (other) => this.declared(other).map((declaration) => declaration.name),
      });
      if (!victim) {
        this.logger.warn(
          { cap: this.cap, scope: JSON.parse(key) as unknown },
          "All live stateful MCPs belong to the requesting scope; exceeding the cap",
        );
        break;
      }
      const [name, client] = victim.instance;
      victim.live.delete(name);
      this.track(client.close());
    }
    this.reservedStateful += 1;
    let released = false;
    return () => {
      if (!released) this.reservedStateful -= 1;
      released = true;
    };
  }

  /** Returns the scope's connected client named `name`, restarting it if it was evicted or crashed. */
  private async ensureClient(scope: McpScope, name: string): Promise<LiveMcpClient> {
    const key = scopeKey(scope);
    const current = this.instances.get(key)?.get(name);
    if (current?.isConnected) return current;
    return this.locks.run(key, async () => {
      const live = this.liveMap(key);
      const existing = live.get(name);
      if (existing?.isConnected) return existing;
      if (existing) {
        live.delete(name);
        this.track(existing.close());
      }
      const declaration = this.declared(key).find((candidate) => candidate.name === name);
      if (!declaration) {
        throw new AppError("NOT_FOUND", `MCP '${name}' is no longer declared in this scope`, {
          details: { name, ...scope },
        });
      }
      this.lastUsed.set(key, this.now());
      return this.start(key, scope, declaration, live);
    });
  }

  private describe(
    scope: McpScope,
    mcpName: string,
    tool: {
      name: string;
      description: string;
      inputSchema: Record<string, unknown>;
      annotations?: McpToolDescriptor["annotations"];
    },
  ): McpToolDescriptor {
    return {
      name: mcpToolName(mcpName, tool.name),
      mcpName,
      toolName: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema,
      ...(tool.annotations ? { annotations: tool.annotations } : {}),
      call: async (args, options = {}) => {
        try {
          const client = await this.ensureClient(scope, mcpName);
          return await client.callTool(tool.name, args, options.signal ? { signal: options.signal } : {});
        } catch (error) {
          const appError = toAppError(error);
          return { content: [{ type: "text", text: appError.userMessage }], isError: true };
        }
      },
    };
  }

  /** Forgets the matching scopes (a start in flight there sees its map replaced and closes what it opened). */
  private async purge(matches: (scope: McpScope) => boolean): Promise<void> {
    const dropped: LiveMcpClient[] = [];
    await this.change(() => {
      let hadDeclarations = false;
      const keys = new Set([...this.specs.keys(), ...this.instances.keys(), ...this.lastUsed.keys()]);
      for (const key of keys) {
        const [agentId, sessionId] = JSON.parse(key) as [string, string];
        if (!matches({ agentId, sessionId })) continue;
        dropped.push(...(this.instances.get(key)?.values() ?? []));
        this.instances.delete(key);
        this.lastUsed.delete(key);
        this.failures.clear(key);
        if (this.specs.delete(key)) hadDeclarations = true;
      }
      return hadDeclarations;
    }).finally(() => Promise.all(dropped.map((client) => client.close())));
  }

  private track(closing: Promise<void>): void {
    const tracked = closing.catch(() => undefined).finally(() => this.closing.delete(tracked));
    this.closing.add(tracked);
  }

  /**
   * One change of the declarations. With a `.mcp`, under its cross-process lock: take in what other
   * processes wrote, apply `mutate` (true when it changed something) and write the result before letting
   * go, so concurrent changes from several processes all land. A change the file did not take is undone
   * here too and thrown (`mcpNotPersisted`): this process never declares what the others cannot see.
   * Without a `.mcp`, just `mutate`.
   */
  private async change(mutate: () => boolean): Promise<void> {
    const file = this.file;
    if (!file) {
      mutate();
      return;
    }
    await file.withLock(async () => {
      await this.follow();
      const before = new Map(this.specs);
      if (!mutate()) return;
      try {
        await file.write(this.specs);
      } catch (error) {
        this.specs = before;
        throw error;
      }
    });
  }
}
