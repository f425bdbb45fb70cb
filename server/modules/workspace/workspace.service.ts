import { attachTracker } from "@/server/modules/metrics/attach-tracker";
import { announceWorkspaceCreated } from "@/server/modules/webhook/webhook-events";
import { randomUUID } from "node:crypto";
import type { TenantScope } from "@/server/auth/scope";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { getAgentOrNull } from "@/server/modules/agent/agent.data";
import { ZAgentDefaultMcps, ZAgentDefaultSkills } from "@/server/modules/agent/agent.types";
import { audited as auditedMutation } from "@/server/modules/audit/audited";
import { auditActorNames } from "@/server/modules/audit/audit.data";
import { getSession } from "@/server/modules/session/session.data";
import { tenantDefaultIsolation } from "@/server/modules/tenant/tenant-policy";
import { createEnqueue } from "@/server/queue/enqueue";
import { AppError } from "@/server/shared/errors";
import type { Workspace } from "@/server/workspace/workspace";
import {
  getWorkspaceOrNull,
  listWorkspaceEvents,
  listWorkspaceLeases,
  pageWorkspaceEvents,
  releaseWorkspaceLease,
  upsertWorkspaceBinding,
} from "./workspace.data";
import { listWorkspaces, type WorkspaceListFilters } from "./workspace-list.data";
import { TRANSITION_EVENT_KINDS, type WorkspaceDTO, type WorkspaceEventKind } from "./workspace.types";
import { assertMayActOnWorkspace, workspaceListLimit } from "./workspace-access";
import { acquireLeaseLocked, touchWorkspaceActivity } from "./workspace-lifecycle.data";
import { createWorkspaceRequests } from "./workspace-requests";
import { addressOfRecord } from "./workspace-spec";
import { createBackendChoice } from "./workspace-backend.service";
import type { BackendPreferences } from "./workspace-backend.data";
import { readWorkspacePageContext } from "./workspace-context.data";
import { explainLiveness } from "./workspace-liveness";
import { effectiveIdleTtlMs } from "@/server/modules/tenant/tenant-policy";

/** `quiet`: a read's lease (dashboard browsing), kept out of the ledger so reads do not flood its events. */
export type LeaseOptions = { holder: string; reason: string; ttlMs?: number; quiet?: boolean };

/**
 * The workspace service: the ONE way API code (routers, chat, team tools, route handlers) reaches a
 * workspace. Every call resolves through the process' WorkspaceManager with the session's stored workspace
 * id; a miss waits for the workers to provision (see AttachingProvider), a stopped workspace comes back
 * transparently. Build one per process with `createWorkspaceService(getEngine())`.
 * `leaseOwnerId`: this process' liveness id (server/queue/heartbeat.ts, group `holders`), written on every
 * lease it takes, so the leases of a process that died are released as soon as its heartbeat stops.
 */
export function createWorkspaceService(engine: WorkspaceEngine, options: { leaseOwnerId?: string } = {}) {
  const enqueue = createEnqueue(engine.queues);
  const bindingsInFlight = new Map<string, Promise<WorkspaceDTO>>();
  const agentReads = new Map<string, ReturnType<typeof getAgentOrNull>>();
  const generationReads = new WeakMap<Workspace, Promise<number>>();
  const backends = createBackendChoice(engine.drivers);

  /** The session's workspace record, created (PENDING) on first use under the agent's isolation policy. */
  async function bindingForSession(scope: TenantScope, sessionId: string) {
    const session = await getSession(scope, sessionId);
    const existing = await getWorkspaceOrNull(scope, session.workspaceId);
    if (existing) return { session, record: existing };
    // One insert per workspace per process however many requests race for it (a burst of interactive
    // transactions would exhaust the pool); the unique id settles races between processes.
    const key = `${scope.tenantId}\0${session.workspaceId}`;
    let pending = bindingsInFlight.get(key);
    if (!pending) {
      pending = (async () => {
        const agent = await getAgentOrNull(scope, session.agentId);
        const { workspace, created } = await upsertWorkspaceBinding(scope, {
          id: session.workspaceId,
          backendKind: await backends.kindFor(scope, session.agentId),
          isolationPolicy: agent?.isolationPolicy ?? (await tenantDefaultIsolation(scope)),
          agentId: session.agentId,
          userId: session.userId ?? scope.userId,
        });
        if (created) announceWorkspaceCreated(scope.tenantId, workspace);
        return workspace;
      })().finally(() => bindingsInFlight.delete(key));
      bindingsInFlight.set(key, pending);
    }
    const workspace = await pending;
    return { session, record: workspace };
  }

  async function requireRecord(scope: TenantScope, workspaceId: string): Promise<WorkspaceDTO> {
    const record = await getWorkspaceOrNull(scope, workspaceId);
    if (!record) {
      throw new AppError("NOT_FOUND", `workspace ${workspaceId} not found`, {
        userMessage: "Workspace not found.",
      });
    }
    return record;
  }

  /**
   * Attaches through the manager (a PURGED record is provisioned again as its next generation by the
   * workers). A cached handle is evicted when it is stale: attached to an earlier generation (a purge came
   * and went), or older than the record's last state change while the record is not READY.
   */
  async function attach(scope: TenantScope, record: WorkspaceDTO): Promise<Workspace> {
    const address = addressOfRecord({ ...record, tenantId: scope.tenantId });
    const cached = engine.manager.peek(address);
    if (cached) {
      const cachedGeneration = engine.generationOf(cached);
      const stale =
        record.state !== "READY"
          ? record.stateChangedAt.getTime() >= (engine.attachedAt(cached) ?? 0)
          : cachedGeneration !== undefined && cachedGeneration !== record.generation;
      if (stale) await engine.manager.close(address);
    }
    const requestedAt = Date.now();
    const workspace = await engine.manager.getWorkspace({
      tenantId: address.tenantId,
      userId: address.userId,
      agentId: record.agentId ?? "",
      workspaceId: record.id,
    });
    const attachedAt = engine.attachedAt(workspace);
    if (attachedAt !== undefined && attachedAt >= requestedAt) {
      // This call (or one racing it) attached: the stage timings get `attach` and, later, `first_answer`.
      attachTracker().attached(workspace, {
        tenantId: scope.tenantId,
        workspaceId: record.id,
        backend: record.backendKind,
        requestedAt,
        attachedAt,
      });
    }
    if (engine.generationOf(workspace) === undefined) {
      // READY before the attach: nothing was provisioned in between. Otherwise the workers just made it
      // READY, possibly as a new generation: ask the record which one this handle belongs to (once per
      // handle, however many calls attached to it at the same time).
      if (record.state === "READY") engine.tagGeneration(workspace, record.generation);
      else {
        let reading = generationReads.get(workspace);
        if (!reading) {
          reading = requireRecord(scope, record.id).then((fresh) => fresh.generation);
          generationReads.set(workspace, reading);
        }
        const generation = await reading;
        if (engine.generationOf(workspace) === undefined) engine.tagGeneration(workspace, generation);
      }
    }
    return workspace;
  }

  /**
   * Applies the agent's stored defaults (default MCPs, default skills) to its scopes of the attached
   * workspace, so they take effect from the agent's next use on. Stored values that no longer parse (an
   * agent saved before validation) are skipped with a warning rather than failing every turn.
   */
  async function applyAgentDefaults(scope: TenantScope, workspace: Workspace, agentId: string | null) {
    if (!agentId) return;
    // One read per agent at a time in this process, however many calls use its workspaces at once.
    const key = `${scope.tenantId}\0${agentId}`;
    let loading = agentReads.get(key);
    if (!loading) {
      loading = getAgentOrNull(scope, agentId).finally(() => agentReads.delete(key));
      agentReads.set(key, loading);
    }
    const agent = await loading;
    if (!agent) return;
    const mcps = ZAgentDefaultMcps.safeParse(agent.defaultMcpConfigs);
    const skills = ZAgentDefaultSkills.safeParse(agent.defaultSkills);
    if (!mcps.success || !skills.success) {
      engine.log.warn({ agentId, workspaceId: workspace.id }, "ignoring the agent's invalid stored defaults");
    }
    await workspace.setAgentDefaults(agentId, {
      // No defaults of its own: the installation's default MCPs apply.
      mcps: mcps.success && mcps.data.length > 0 ? mcps.data : null,
      skills: skills.success ? skills.data : [],
    });
  }

  async function acquireLease(scope: TenantScope, workspaceId: string, lease: LeaseOptions) {
    const ttlMs = Math.min(lease.ttlMs ?? engine.config.leaseTtlMs, engine.config.maxLeaseMs);
    return acquireLeaseLocked(
      scope,
      workspaceId,
      {
        holder: lease.holder,
        reason: lease.reason,
        expiresAt: new Date(Date.now() + ttlMs),
        ownerId: options.leaseOwnerId ?? null,
      },
      undefined,
      { quiet: lease.quiet ?? false },
    );
  }

  async function releaseLease(
    scope: TenantScope,
    workspaceId: string,
    holder: string,
    options: { quiet?: boolean } = {},
  ): Promise<boolean> {
    const released = await releaseWorkspaceLease(scope, workspaceId, holder, undefined, options);
    // The end of a turn is activity too: the idle clock starts now, not when the turn began. The end of a
    // read is not (quiet): browsing never keeps a workspace awake.
    if (released && !options.quiet) await touchWorkspaceActivity(scope, workspaceId, new Date());
    return released;
  }

  /** Runs `fn` on the workspace while holding a lease (the sweeper never stops a leased workspace). */
  async function withLease<T>(
    scope: TenantScope,
    workspaceId: string,
    lease: LeaseOptions & { agentId?: string | null },
    fn: (workspace: Workspace, record: WorkspaceDTO) => Promise<T>,
  ): Promise<T> {
    await acquireLease(scope, workspaceId, lease);
    try {
      const record = await requireRecord(scope, workspaceId);
      const workspace = await attach(scope, record);
      await applyAgentDefaults(scope, workspace, lease.agentId ?? null);
      return await fn(workspace, record);
    } finally {
      await releaseLease(scope, workspaceId, lease.holder, { quiet: lease.quiet ?? false }).catch(
        (error: unknown) =>
          engine.log.warn({ err: error, workspaceId, holder: lease.holder }, "releasing a lease failed"),
      );
    }
  }

  /** A short lease for one API call (`call:<uuid>`), so the call's workspace is not stopped under it. */
  function callLease(reason: string): LeaseOptions {
    return { holder: `call:${randomUUID()}`, reason, ttlMs: 5 * 60_000 };
  }

  /** Runs a workspace mutation and audits it (target: the workspace) with its outcome. */
  const audited = <T>(
    scope: TenantScope,
    action: string,
    targetId: string,
    details: Record<string, unknown>,
    fn: () => Promise<T>,
  ): Promise<T> =>
    auditedMutation(scope, { action, targetType: "workspace", targetId, details }, fn, (error: unknown) =>
      engine.log.error({ err: error, action, targetId }, "audit write failed"),
    );

  /**
   * The workspace page's 50 newest events, and why it is in its state (its newest transition, however many
   * lease events came after it): found among those 50 when it is one of them, else read on its own.
   */
  async function recentEventsAndLastTransition(scope: TenantScope, workspaceId: string) {
    const page = await pageWorkspaceEvents(scope, workspaceId, { limit: 50 });
    const transitionKinds = new Set<WorkspaceEventKind>(TRANSITION_EVENT_KINDS);
    const seen = page.items.find((event) => transitionKinds.has(event.kind));
    // Every event is on the page when there is no next one: no transition among them means none at all.
    if (seen || page.nextCursor === null) return { events: page.items, lastTransition: seen ?? null };
    const [older] = await listWorkspaceEvents(scope, workspaceId, {
      limit: 1,
      kinds: [...TRANSITION_EVENT_KINDS],
    });
    return { events: page.items, lastTransition: older ?? null };
  }

  const requests = createWorkspaceRequests({ enqueue, audited, requireRecord });

  return {
    engine,
    audited,
    acquireLease,
    releaseLease,
    withLease,
    callLease,

    /**
     * The workspace of a session, initialised and attached (provisioned by the workers first when needed).
     * Use `withSessionWorkspace` instead when the work takes time: it holds a lease meanwhile.
     */
    async resolveForSession(scope: TenantScope, sessionId: string) {
      const { session, record } = await bindingForSession(scope, sessionId);
      const workspace = await attach(scope, record);
      await applyAgentDefaults(scope, workspace, session.agentId);
      return { session, record, workspace };
    },

    /** Runs `fn` on the session's workspace under a lease (chat turns: holder `turn:<id>`, tool calls, ...). */
    async withSessionWorkspace<T>(
      scope: TenantScope,
      sessionId: string,
      lease: LeaseOptions,
      fn: (workspace: Workspace, record: WorkspaceDTO) => Promise<T>,
    ): Promise<T> {
      const { session, record } = await bindingForSession(scope, sessionId);
      return withLease(scope, record.id, { ...lease, agentId: session.agentId }, fn);
    },

    /** The backends of this installation and the tenant's choice among them (backend-choice service). */
    backends,

    /**
     * The binding row (PENDING, on the backend the agent, the tenant or the installation chooses) that
     * session.create writes with a new session; it read the backend preferences with the agent.
     */
    bindingFor(input: {
      workspaceId: string;
      agentId: string;
      userId: string | null;
      isolationPolicy: "PER_AGENT" | "PER_SESSION" | "PER_USER";
      backendPreferences: BackendPreferences;
    }) {
      return {
        id: input.workspaceId,
        backendKind: backends.kindFrom(input.backendPreferences),
        isolationPolicy: input.isolationPolicy,
        agentId: input.agentId,
        userId: input.userId,
      };
    },

    /** Records a workspace binding (PENDING) without provisioning. */
    async bindWorkspace(
      scope: TenantScope,
      input: {
        workspaceId: string;
        agentId: string;
        userId: string | null;
        isolationPolicy: "PER_AGENT" | "PER_SESSION" | "PER_USER";
      },
    ): Promise<WorkspaceDTO> {
      const { workspace, created } = await upsertWorkspaceBinding(scope, {
        id: input.workspaceId,
        backendKind: await backends.kindFor(scope, input.agentId),
        isolationPolicy: input.isolationPolicy,
        agentId: input.agentId,
        userId: input.userId,
      });
      if (created) announceWorkspaceCreated(scope.tenantId, workspace);
      return workspace;
    },

    async list(scope: TenantScope, options: WorkspaceListFilters & { limit?: number; cursor?: string }) {
      const page = await listWorkspaces(scope, {
        ...options,
        onlyAccessible: await workspaceListLimit(scope),
      });
      return { ...page, items: page.items.map((record) => describe(record)) };
    },

    async get(scope: TenantScope, workspaceId: string) {
      const record = await requireRecord(scope, workspaceId);
      await assertMayActOnWorkspace(scope, record);
      const [leases, { events, lastTransition }, context] = await Promise.all([
        listWorkspaceLeases(scope, workspaceId),
        recentEventsAndLastTransition(scope, workspaceId),
        readWorkspacePageContext(scope, record.agentId),
      ]);
      return {
        ...describe(record),
        agentName: context.agentName,
        leases,
        liveness: explainLiveness(record, leases, {
          idleTtlMs: effectiveIdleTtlMs(context.tenantIdleTtlMs, engine.config.idleTtlMs),
          maxLeaseMs: engine.config.maxLeaseMs,
        }),
        events,
        lastTransition,
      };
    },

    /** The workspace's ledger, newest first, a page at a time, optionally only some kinds of events. */
    async events(
      scope: TenantScope,
      workspaceId: string,
      options: { kinds?: WorkspaceEventKind[]; limit?: number; cursor?: string },
    ) {
      await assertMayActOnWorkspace(scope, await requireRecord(scope, workspaceId));
      const page = await pageWorkspaceEvents(scope, workspaceId, options);
      // Actors as people read them ("user:<id>" → the email, "api_key:<id>" → the key's name).
      const names = await auditActorNames(
        scope,
        page.items.flatMap((event) => {
          const [type, ...id] = event.actor.split(":");
          return type === "user" || type === "api_key" ? [{ type, id: id.join(":") }] : [];
        }),
      );
      return {
        ...page,
        items: page.items.map((event) => ({ ...event, actorName: names.get(event.actor) ?? null })),
      };
    },

    ...requests,

    /** `session.purge`: forget sessions' MCP scopes and offload files in their workspace, through a job. */
    async enqueueSessionPurge(
      scope: TenantScope,
      input: { workspaceId: string; agentId: string; sessionIds: string[] },
    ) {
      const job = await enqueue("session.purge", { tenantId: scope.tenantId, ...input });
      return { jobId: job.id ?? null };
    },

    /** `agent.purge`: forget an agent's skill partition and MCP scopes in every workspace it used. */
    async enqueueAgentPurge(scope: TenantScope, input: { agentId: string; workspaceIds: string[] }) {
      const job = await enqueue("agent.purge", { tenantId: scope.tenantId, ...input });
      return { jobId: job.id ?? null };
    },

    /**
     * How this installation confines workspaces by default (the dashboard warns when it does not), and
     * every backend it runs.
     */
    backendInfo() {
      return {
        ...engine.drivers.default.isolation,
        backends: engine.drivers.all.map((driver) => ({ kind: driver.kind, ...driver.isolation })),
      };
    },

    /**
     * The record + an attached workspace, under a short call lease (routers' workspace calls and routes).
     * A member reaches only their own sessions' workspaces (workspace-access.ts), checked before the lease.
     */
    async withWorkspace<T>(
      scope: TenantScope,
      workspaceId: string,
      reason: string,
      fn: (workspace: Workspace, record: WorkspaceDTO) => Promise<T>,
      /** `quiet` for reads: their call lease writes no ledger events. */
      options: { agentId?: string | null; quiet?: boolean } = {},
    ) {
      await assertMayActOnWorkspace(scope, await requireRecord(scope, workspaceId));
      const lease = { ...callLease(reason), quiet: options.quiet ?? false, agentId: options.agentId ?? null };
      return withLease(scope, workspaceId, lease, fn);
    },
  };

  /**
   * What confines the record's workspace: the driver of its backend; a record left on a backend this
   * installation no longer runs is not claimed to be isolated.
   */
  function isolationOf(record: WorkspaceDTO) {
    const driver = engine.drivers.find(record.backendKind);
    const isolation = driver?.isolation ?? null;
    const isolated = isolation?.isolated ?? false;
    return {
      backend: isolation?.backend ?? record.backendKind,
      isolated,
      // host-unconfined runs agent commands on the host with Berth's privileges.
      trustedOnly: !isolated,
      // The backend offers a dashboard terminal (a PTY in the workspace's confinement).
      terminal: driver?.capabilities.pty ?? false,
    };
  }

  function describe<R extends WorkspaceDTO>(record: R) {
    const { backendHandle: _handle, ...rest } = record;
    return {
      ...rest,
      ...isolationOf(record),
      idleMs: record.lastActivityAt ? Math.max(0, Date.now() - record.lastActivityAt.getTime()) : null,
    };
  }
}

export type WorkspaceService = ReturnType<typeof createWorkspaceService>;
