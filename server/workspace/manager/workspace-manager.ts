import { toAppError, type AppError } from "@/server/shared/errors";
import type { MachineAttacher, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { Workspace, type WorkspaceOptions } from "@/server/workspace/workspace";
import { assignWorkspaceId, DEFAULT_ISOLATION, IsolationPolicy } from "./isolation";
import { MinHeap } from "./min-heap";

/** A workspace's identity in the manager: the same id under another tenant or user is another workspace. */
export type WorkspaceAddress = { tenantId: string; userId: string; workspaceId: string };

export type GetWorkspaceInput = {
  tenantId: string;
  userId: string;
  agentId: string;
  sessionId?: string;
  /** The session's stored workspace id; omitted, one is assigned from the isolation policy. */
  workspaceId?: string;
};

export type EvictReason = "ttl" | "dead" | "closed" | "close_all";

/** Observability hooks (the service layer records WorkspaceEvents from them). They must not throw. */
export type WorkspaceManagerHooks = {
  onAttach?(event: {
    address: WorkspaceAddress;
    workspace: Workspace;
    durationMs: number;
    replaced: boolean;
  }): void;
  onAttachError?(event: { address: WorkspaceAddress; error: AppError; durationMs: number }): void;
  onEvict?(event: { address: WorkspaceAddress; workspace: Workspace; reason: EvictReason }): void;
  onCloseError?(event: { address: WorkspaceAddress; error: AppError }): void;
};

export type WorkspaceManagerOptions = {
  /** Where workspaces' live machines come from (the engine's RecordAttacher, or `attachThrough(driver)`). */
  attacher: MachineAttacher;
  isolation?: IsolationPolicy;
  /** Options for every Workspace the manager creates (default MCPs, skill paths, ...). */
  workspaceOptions?: Omit<WorkspaceOptions, "spec" | "attacher">;
  /** Idle time after which a cached workspace is closed. Default 3 600 000 ms (the reference's 3600 s). */
  ttlMs?: number;
  /**
   * The tenants whose own idle TTL differs from `ttlMs` (a tenant's policy), read at the start of every
   * eviction pass: a workspace is detached after ITS tenant's idle time, and a changed setting applies to
   * the workspaces already cached. A failed read keeps the TTLs of the previous pass.
   */
  tenantTtls?: () => Promise<ReadonlyMap<string, number>>;
  /**
   * Period of the background eviction of idle cache entries; null = no timer (call `evictIdle()` yourself).
   * Default 300 000 ms. (Not the `workspace.sweep` job, which STOPS idle machines; this only detaches.)
   */
  evictIntervalMs?: number | null;
  /** Cache hits re-check liveness at most this often. Default 10 000 ms. */
  livenessIntervalMs?: number;
  /** Whether hits check liveness at all. Default: when the attacher's machines may vanish. */
  checkLiveness?: boolean;
  hooks?: WorkspaceManagerHooks;
  /** Milliseconds clock (monotonic by default); injectable so tests move time without sleeping. */
  now?: () => number;
};

type Entry = {
  readonly key: string;
  readonly address: WorkspaceAddress;
  readonly workspace: Workspace;
  lastAccess: number;
  /** The deadline of its one live heap item; items with another key are stale (a retuned TTL). */
  queuedAt: number;
  lastLivenessCheck: number;
  probe: Promise<Workspace> | null;
  /** Work running on it now (`pin`): the idle TTL never closes it under that work. */
  pins: number;
};

const ID_MEMO_LIMIT = 50_000;

/**
 * Caches initialised workspaces by (tenant, user, workspace id).
 * - Hit: one Map lookup plus a timestamp write, O(1); no lock.
 * - Miss: per-key single flight. Concurrent callers share one opening promise; other keys never wait
 *   for it (the reference held one global lock through initialise). A failed open is closed and
 *   not cached, so the next call retries.
 * - Liveness: hits on sandboxed workspaces re-check `isAlive()` at most every `livenessIntervalMs`; a dead
 *   one is evicted and opened again (reference issues #2202, #2483).
 * - Idle TTL: a min-heap of deadlines with lazy invalidation. A hit only updates its timestamp; an eviction pass pops
 *   the deadlines that passed and re-queues entries touched since, so a tick costs O((evicted + re-queued) ·
 *   log n) instead of a scan of every entry. Each entry's TTL is its tenant's (`tenantTtls`), re-read every pass.
 *   A workspace pinned by running work (`pin`: a turn, a tool call) is not idle, however long the work takes.
 */
export class WorkspaceManager implements AsyncDisposable {
  readonly isolation: IsolationPolicy;
  private readonly attacher: MachineAttacher;
  private readonly workspaceOptions: Omit<WorkspaceOptions, "spec" | "attacher">;
  private readonly ttlMs: number;
  private readonly loadTenantTtls: (() => Promise<ReadonlyMap<string, number>>) | null;
  private tenantTtls: ReadonlyMap<string, number> = new Map();
  private readonly livenessIntervalMs: number;
  private readonly checkLiveness: boolean;
  private readonly hooks: WorkspaceManagerHooks;
  private readonly now: () => number;
  /** tenant → user → workspace id → entry. Nested so a hit hashes the caller's strings, not a joined key. */
  private readonly entries = new Map<string, Map<string, Map<string, Entry>>>();
  private entryCount = 0;
  private readonly pending = new Map<string, Promise<Workspace>>();
  private readonly deadlines = new MinHeap<Entry>();
  private readonly idMemo = new Map<string, Map<string, string>>();
  private idMemoSize = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(options: WorkspaceManagerOptions) {
    this.attacher = options.attacher;
    this.isolation = options.isolation ?? DEFAULT_ISOLATION;
    this.workspaceOptions = options.workspaceOptions ?? {};
    this.ttlMs = options.ttlMs ?? 3_600_000;
    this.loadTenantTtls = options.tenantTtls ?? null;
    this.livenessIntervalMs = options.livenessIntervalMs ?? 10_000;
    this.checkLiveness = options.checkLiveness ?? options.attacher.mayVanish;
    this.hooks = options.hooks ?? {};
    this.now = options.now ?? (() => performance.now());
    const evictIntervalMs = options.evictIntervalMs === undefined ? 300_000 : options.evictIntervalMs;
    if (evictIntervalMs !== null) {
      this.timer = setInterval(() => void this.evictIdle().catch(() => undefined), evictIntervalMs);
      // The eviction timer must never keep a process alive on its own.
      this.timer.unref();
    }
  }

  /** The workspace id a request maps to under this manager's policy (memoised for PER_AGENT/PER_USER). */
  workspaceIdFor(input: Pick<GetWorkspaceInput, "tenantId" | "userId" | "agentId" | "sessionId">): string {
    if (this.isolation === IsolationPolicy.PER_SESSION) return assignWorkspaceId(this.isolation, input);
    // Nested maps keyed by the caller's own strings: no concatenated key to build and hash on every hit.
    // PER_USER ids depend on the tenant, PER_AGENT ids on the agent (one policy per manager).
    const agentKey = this.isolation === IsolationPolicy.PER_USER ? input.tenantId : input.agentId;
    let byAgent = this.idMemo.get(input.userId);
    let id = byAgent?.get(agentKey);
    if (id === undefined) {
      id = assignWorkspaceId(this.isolation, input);
      if (this.idMemoSize >= ID_MEMO_LIMIT) {
        this.idMemo.clear();
        this.idMemoSize = 0;
        byAgent = undefined;
      }
      if (!byAgent) {
        byAgent = new Map();
        this.idMemo.set(input.userId, byAgent);
      }
      byAgent.set(agentKey, id);
      this.idMemoSize++;
    }
    return id;
  }

  /** An initialised workspace for the request: cached on a hit, opened (attached and initialised) once per key on a miss. */
  getWorkspace(input: GetWorkspaceInput): Promise<Workspace> {
    const workspaceId = input.workspaceId ?? this.workspaceIdFor(input);
    const entry = this.entries.get(input.tenantId)?.get(input.userId)?.get(workspaceId);
    if (entry !== undefined) {
      const now = this.now();
      entry.lastAccess = now;
      if (entry.probe !== null) return entry.probe;
      // Closed behind the manager's back (someone called workspace.close()), or an operation found its
      // files gone: check and replace it right away.
      if (!entry.workspace.isInitialized || entry.workspace.vanished) return this.probe(entry, input, now);
      if (!this.checkLiveness || now - entry.lastLivenessCheck < this.livenessIntervalMs) {
        return Promise.resolve(entry.workspace);
      }
      return this.probe(entry, input, now);
    }
    const spec: WorkspaceSpec = {
      workspaceId,
      tenantId: input.tenantId,
      userId: input.userId,
      agentId: input.agentId,
      isolation: this.isolation,
    };
    return this.open(addressKey(input.tenantId, input.userId, workspaceId), spec, false);
  }

  /** The cached workspace for an address, without touching its idle clock; undefined when not cached. */
  peek(address: WorkspaceAddress): Workspace | undefined {
    return this.lookup(address)?.workspace;
  }

  /**
   * Keeps a cached workspace from idle eviction while work runs on it: a turn that runs longer than the
   * idle TTL (a long build, a model that thinks for minutes) must not find its workspace closed between two
   * tool calls, since only `getWorkspace` restarts the idle clock. The release (idempotent) starts the idle
   * time from the end of the work. A workspace that is not this manager's cached one needs no pin.
   */
  pin(workspace: Workspace): () => void {
    const { tenantId, userId, workspaceId } = workspace.spec;
    const entry = this.lookup({ tenantId, userId, workspaceId });
    if (entry?.workspace !== workspace) return () => undefined;
    entry.pins++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      entry.pins--;
      entry.lastAccess = this.now();
    };
  }

  /** Number of cached (initialised) workspaces. */
  get size(): number {
    return this.entryCount;
  }

  /** Closes and forgets one workspace (waiting for its opening, if any). Unknown addresses are a no-op. */
  async close(address: WorkspaceAddress): Promise<void> {
    const key = addressKey(address.tenantId, address.userId, address.workspaceId);
    await this.pending.get(key)?.catch(() => undefined);
    const entry = this.lookup(address);
    if (entry) await this.evict(entry, "closed");
  }

  /** Closes every cached workspace in parallel; the manager stays usable. Close errors go to `onCloseError`. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.pending.values()].map((pending) => pending.catch(() => undefined)));
    // Heap items of the closed entries go stale and are dropped lazily by later eviction passes.
    const all = [...this.entries.values()].flatMap((users) =>
      [...users.values()].flatMap((workspaces) => [...workspaces.values()]),
    );
    await Promise.all(all.map((entry) => this.evict(entry, "close_all")));
  }

  /**
   * Closes the workspaces idle for longer than the TTL; returns how many. Pops only the heap deadlines that
   * have passed: entries touched since are re-queued with their new deadline, stale items dropped.
   */
  async evictIdle(): Promise<number> {
    if (this.loadTenantTtls) await this.retune(this.loadTenantTtls);
    const now = this.now();
    const expired: Entry[] = [];
    for (
      let top = this.deadlines.peekKey();
      top !== undefined && top <= now;
      top = this.deadlines.peekKey()
    ) {
      const { key, value: entry } = this.deadlines.pop()!;
      // Closed or replaced since it was queued, or queued again with a retuned TTL.
      if (this.lookup(entry.address) !== entry || key !== entry.queuedAt) continue;
      const due = entry.lastAccess + this.ttlOf(entry);
      if (due > now) this.queue(entry, due);
      // Pinned: looked at again one TTL from now (its release restarts the idle clock anyway).
      else if (entry.pins > 0) this.queue(entry, now + this.ttlOf(entry));
      else expired.push(entry);
    }
    await Promise.all(expired.map((entry) => this.evict(entry, "ttl")));
    return expired.length;
  }

  /** The idle time after which a tenant's cached workspaces are detached (as of the last eviction pass). */
  idleTtlOf(tenantId: string): number {
    return this.tenantTtls.get(tenantId) ?? this.ttlMs;
  }

  private ttlOf(entry: Entry): number {
    return this.idleTtlOf(entry.address.tenantId);
  }

  private queue(entry: Entry, deadline: number): void {
    entry.queuedAt = deadline;
    this.deadlines.push(deadline, entry);
  }

  /**
   * Reads the tenants' TTLs; the cached workspaces of a tenant whose TTL changed are queued again at
   * their new deadline (their old heap items go stale), so a shortened TTL applies now, not an old TTL later.
   */
  private async retune(load: () => Promise<ReadonlyMap<string, number>>): Promise<void> {
    let next: ReadonlyMap<string, number>;
    try {
      next = await load();
    } catch {
      return;
    }
    const previous = this.tenantTtls;
    this.tenantTtls = next;
    for (const tenantId of new Set([...previous.keys(), ...next.keys()])) {
      if (previous.get(tenantId) === next.get(tenantId)) continue;
      for (const workspaces of this.entries.get(tenantId)?.values() ?? []) {
        for (const entry of workspaces.values()) this.queue(entry, entry.lastAccess + this.ttlOf(entry));
      }
    }
  }

  /** Stops the eviction timer and closes everything (`await using manager = ...`). */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.closeAll();
  }

  private open(key: string, spec: WorkspaceSpec, replaced: boolean): Promise<Workspace> {
    const inFlight = this.pending.get(key);
    if (inFlight) return inFlight;
    const address = { tenantId: spec.tenantId, userId: spec.userId, workspaceId: spec.workspaceId };
    const started = this.now();
    const promise = (async () => {
      const workspace = new Workspace({ ...this.workspaceOptions, spec, attacher: this.attacher });
      try {
        await workspace.initialize();
      } catch (error) {
        // initialize already detached the machine; close() makes sure nothing half-open stays behind.
        await workspace.close().catch(() => undefined);
        const appError = toAppError(error);
        this.emit(() =>
          this.hooks.onAttachError?.({ address, error: appError, durationMs: this.now() - started }),
        );
        throw appError;
      }
      const now = this.now();
      const entry: Entry = {
        key,
        address,
        workspace,
        lastAccess: now,
        queuedAt: 0,
        lastLivenessCheck: now,
        probe: null,
        pins: 0,
      };
      this.store(entry);
      this.queue(entry, now + this.ttlOf(entry));
      this.emit(() => this.hooks.onAttach?.({ address, workspace, durationMs: now - started, replaced }));
      return workspace;
    })();
    this.pending.set(key, promise);
    void promise.then(
      () => this.pending.delete(key),
      () => this.pending.delete(key),
    );
    return promise;
  }

  /** Liveness check shared by all hits that arrive while it runs; a dead workspace is replaced. */
  private probe(entry: Entry, input: GetWorkspaceInput, now: number): Promise<Workspace> {
    entry.lastLivenessCheck = now;
    const probe = (async () => {
      if (await entry.workspace.isAlive()) return entry.workspace;
      await this.evict(entry, "dead");
      const spec = { ...entry.workspace.spec, agentId: input.agentId };
      return this.open(entry.key, spec, true);
    })();
    entry.probe = probe;
    void probe.then(
      () => (entry.probe = null),
      () => (entry.probe = null),
    );
    return probe;
  }

  private async evict(entry: Entry, reason: EvictReason): Promise<void> {
    if (!this.remove(entry)) return;
    this.emit(() => this.hooks.onEvict?.({ address: entry.address, workspace: entry.workspace, reason }));
    try {
      await entry.workspace.close();
    } catch (error) {
      const appError = toAppError(error);
      this.emit(() => this.hooks.onCloseError?.({ address: entry.address, error: appError }));
    }
  }

  private lookup(address: WorkspaceAddress): Entry | undefined {
    return this.entries.get(address.tenantId)?.get(address.userId)?.get(address.workspaceId);
  }

  private store(entry: Entry): void {
    const { tenantId, userId, workspaceId } = entry.address;
    let users = this.entries.get(tenantId);
    if (!users) this.entries.set(tenantId, (users = new Map<string, Map<string, Entry>>()));
    let workspaces = users.get(userId);
    if (!workspaces) users.set(userId, (workspaces = new Map<string, Entry>()));
    if (!workspaces.has(workspaceId)) this.entryCount++;
    workspaces.set(workspaceId, entry);
  }

  /** Removes exactly this entry (not a newer one under the same address); false when it is not cached. */
  private remove(entry: Entry): boolean {
    const { tenantId, userId, workspaceId } = entry.address;
    const users = this.entries.get(tenantId);
    const workspaces = users?.get(userId);
    if (workspaces?.get(workspaceId) !== entry) return false;
    workspaces.delete(workspaceId);
    this.entryCount--;
    if (workspaces.size === 0) users!.delete(userId);
    if (users!.size === 0) this.entries.delete(tenantId);
    return true;
  }

  private emit(call: () => void): void {
    try {
      call();
    } catch {
      // A failing observer must not break workspace management.
    }
  }
}

/** Key of the single-flight map (misses only). NUL never appears in database ids, so it is unambiguous. */
function addressKey(tenantId: string, userId: string, workspaceId: string): string {
  return `${tenantId}\0${userId}\0${workspaceId}`;
}
