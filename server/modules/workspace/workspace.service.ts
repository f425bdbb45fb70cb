import { randomUUID } from "node:crypto";
import type { TenantScope } from "@/server/auth/scope";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { getAgentOrNull } from "@/server/modules/agent/agent.data";
import { listPurgeReceipts } from "@/server/modules/audit/audit.data";
import { recordAudit } from "@/server/modules/audit/audit-buffer.service";
import { getSession } from "@/server/modules/session/session.data";
import { createEnqueue } from "@/server/queue/enqueue";
import { AppError, isAppError } from "@/server/shared/errors";
import type { Workspace } from "@/server/workspace/workspace";
import {
  getWorkspaceOrNull,
  listWorkspaceEvents,
  listWorkspaceLeases,
  listWorkspaces,
  releaseWorkspaceLease,
  upsertWorkspaceBinding,
} from "./workspace.data";
import type { WorkspaceDTO, WorkspaceState } from "./workspace.types";
import { acquireLeaseLocked, touchWorkspaceActivity, transitionFrom } from "./workspace-lifecycle.data";
import { addressOfRecord } from "./workspace-spec";

export type LeaseOptions = { holder: string; reason: string; ttlMs?: number };

/**
 * The workspace service: the ONE way API code (routers, chat, team tools, route handlers) reaches a
 * workspace. Every call resolves through the process' WorkspaceManager with the session's stored workspace
 * id; a miss waits for the workers to provision (see AttachingProvider), a stopped workspace comes back
 * transparently. Build one per process with `createWorkspaceService(getEngine())`.
 */
export function createWorkspaceService(engine: WorkspaceEngine) {
  const enqueue = createEnqueue(engine.queues);
  const bindingsInFlight = new Map<string, Promise<WorkspaceDTO>>();

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
        const { workspace } = await upsertWorkspaceBinding(scope, {
          id: session.workspaceId,
          backendKind: engine.machine.kind,
          isolationPolicy: agent?.isolationPolicy ?? "PER_AGENT",
          agentId: session.agentId,
          userId: session.userId ?? scope.userId,
        });
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

  /** Attaches through the manager; a cached handle older than the record's last state change is evicted. */
  async function attach(scope: TenantScope, record: WorkspaceDTO): Promise<Workspace> {
    if (record.state === "PURGED") {
      throw new AppError("CONFLICT", `workspace ${record.id} is purged`, {
        userMessage: "This workspace was purged.",
      });
    }
    const address = addressOfRecord({ ...record, tenantId: scope.tenantId });
    const cached = engine.manager.peek(address);
    if (cached && record.state !== "READY") {
      const attachedAt = engine.attachedAt(cached) ?? 0;
      if (record.stateChangedAt.getTime() >= attachedAt) await engine.manager.close(address);
    }
    return engine.manager.getWorkspace({
      tenantId: address.tenantId,
      userId: address.userId,
      agentId: record.agentId ?? "",
      workspaceId: record.id,
    });
  }

  async function acquireLease(scope: TenantScope, workspaceId: string, lease: LeaseOptions) {
    const ttlMs = Math.min(lease.ttlMs ?? engine.config.leaseTtlMs, engine.config.maxLeaseMs);
    return acquireLeaseLocked(scope, workspaceId, {
      holder: lease.holder,
      reason: lease.reason,
      expiresAt: new Date(Date.now() + ttlMs),
    });
  }

  async function releaseLease(scope: TenantScope, workspaceId: string, holder: string): Promise<boolean> {
    const released = await releaseWorkspaceLease(scope, workspaceId, holder);
    // The end of a turn is activity too: the idle clock starts now, not when the turn began.
    if (released) await touchWorkspaceActivity(scope, workspaceId, new Date());
    return released;
  }

  /** Runs `fn` on the workspace while holding a lease (the sweeper never stops a leased workspace). */
  async function withLease<T>(
    scope: TenantScope,
    workspaceId: string,
    lease: LeaseOptions,
    fn: (workspace: Workspace, record: WorkspaceDTO) => Promise<T>,
  ): Promise<T> {
    await acquireLease(scope, workspaceId, lease);
    try {
      const record = await requireRecord(scope, workspaceId);
      return await fn(await attach(scope, record), record);
    } finally {
      await releaseLease(scope, workspaceId, lease.holder).catch((error: unknown) =>
        engine.log.warn({ err: error, workspaceId, holder: lease.holder }, "releasing a lease failed"),
      );
    }
  }

  /** A short lease for one API call (`call:<uuid>`), so the call's workspace is not stopped under it. */
  function callLease(reason: string): LeaseOptions {
    return { holder: `call:${randomUUID()}`, reason, ttlMs: 5 * 60_000 };
  }

  async function audited<T>(
    scope: TenantScope,
    action: string,
    targetId: string,
    details: Record<string, unknown>,
    fn: () => Promise<T>,
  ): Promise<T> {
    const write = (outcome: "success" | "failure", extra: Record<string, unknown>) =>
      recordAudit(scope, {
        action,
        targetType: "workspace",
        targetId,
        outcome,
        details: { ...details, ...extra },
      }).catch((error: unknown) => engine.log.error({ err: error, action, targetId }, "audit write failed"));
    try {
      const result = await fn();
      await write("success", {});
      return result;
    } catch (error) {
      await write("failure", { code: isAppError(error) ? error.code : "INTERNAL" });
      throw error;
    }
  }

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
      return { session, record, workspace: await attach(scope, record) };
    },

    /** Runs `fn` on the session's workspace under a lease (chat turns: holder `turn:<id>`, tool calls, ...). */
    async withSessionWorkspace<T>(
      scope: TenantScope,
      sessionId: string,
      lease: LeaseOptions,
      fn: (workspace: Workspace, record: WorkspaceDTO) => Promise<T>,
    ): Promise<T> {
      const { record } = await bindingForSession(scope, sessionId);
      return withLease(scope, record.id, lease, fn);
    },

    /** Records a workspace binding (PENDING) without provisioning: what session.create may call. */
    async bindWorkspace(
      scope: TenantScope,
      input: {
        workspaceId: string;
        agentId: string;
        userId: string | null;
        isolationPolicy: "PER_AGENT" | "PER_SESSION" | "PER_USER";
      },
    ): Promise<WorkspaceDTO> {
      const { workspace } = await upsertWorkspaceBinding(scope, {
        id: input.workspaceId,
        backendKind: engine.machine.kind,
        isolationPolicy: input.isolationPolicy,
        agentId: input.agentId,
        userId: input.userId,
      });
      return workspace;
    },

    async list(
      scope: TenantScope,
      options: { states?: WorkspaceState[]; agentId?: string; limit?: number; cursor?: string },
    ) {
      const page = await listWorkspaces(scope, options);
      return { ...page, items: page.items.map((record) => describe(record)) };
    },

    async get(scope: TenantScope, workspaceId: string) {
      const record = await requireRecord(scope, workspaceId);
      const [leases, events] = await Promise.all([
        listWorkspaceLeases(scope, workspaceId),
        listWorkspaceEvents(scope, workspaceId, { limit: 50 }),
      ]);
      return { ...describe(record), leases, events };
    },

    /** Asks the workers to stop a workspace (READY → STOPPING now, STOPPED by `workspace.stop`). */
    async requestStop(
      scope: TenantScope,
      workspaceId: string,
      options: { force?: boolean; reason?: string } = {},
    ) {
      return audited(scope, "workspace.stop", workspaceId, { force: options.force ?? false }, async () => {
        const record = await requireRecord(scope, workspaceId);
        if (record.activeLeases > 0 && !options.force) {
          throw new AppError(
            "CONFLICT",
            `workspace ${workspaceId} has ${record.activeLeases} active lease(s)`,
            {
              userMessage: "The workspace is in use; pass force to stop it anyway.",
              details: { activeLeases: record.activeLeases },
            },
          );
        }
        const reason = options.reason ?? "stop requested by an admin";
        if (record.state === "READY") {
          await transitionFrom(scope, workspaceId, { from: ["READY"], to: "STOPPING", reason });
        } else if (record.state !== "STOPPING") {
          return { state: record.state, jobId: null };
        }
        const job = await enqueue("workspace.stop", { tenantId: scope.tenantId, workspaceId, reason });
        return { state: "STOPPING" as const, jobId: job.id ?? null };
      });
    },

    /** Asks the workers to purge a workspace for good (files, skills, MCP declarations, offload, rows). */
    async requestPurge(
      scope: TenantScope,
      workspaceId: string,
      options: { force?: boolean; reason?: string } = {},
    ) {
      return audited(scope, "workspace.purge", workspaceId, { force: options.force ?? false }, async () => {
        const record = await requireRecord(scope, workspaceId);
        if (record.state === "PURGED") return { state: record.state, jobId: null };
        if (record.activeLeases > 0 && !options.force) {
          throw new AppError(
            "CONFLICT",
            `workspace ${workspaceId} has ${record.activeLeases} active lease(s)`,
            {
              userMessage: "The workspace is in use; pass force to purge it anyway.",
            },
          );
        }
        const job = await enqueue("workspace.purge", {
          tenantId: scope.tenantId,
          workspaceId,
          reason: options.reason ?? "purge requested",
          actor: scope.apiKeyId
            ? `api_key:${scope.apiKeyId}`
            : scope.userId
              ? `user:${scope.userId}`
              : "system",
        });
        return { state: record.state, jobId: job.id ?? null };
      });
    },

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

    async purgeReceipts(
      scope: TenantScope,
      options: { targetType?: "workspace" | "session" | "agent"; targetId?: string; limit?: number },
    ) {
      return listPurgeReceipts(scope, options);
    },

    /** How this installation confines workspaces (the dashboard warns when it does not). */
    backendInfo() {
      return { ...engine.machine.isolation };
    },

    /** The record + an attached workspace, under a short call lease (routers' workspace calls). */
    async withWorkspace<T>(
      scope: TenantScope,
      workspaceId: string,
      reason: string,
      fn: (workspace: Workspace, record: WorkspaceDTO) => Promise<T>,
    ) {
      return withLease(scope, workspaceId, callLease(reason), fn);
    },
  };

  /**
   * What confines the record's workspace: the installation's backend when the record is of its kind; a
   * record left from another backend is not claimed to be isolated.
   */
  function isolationOf(record: WorkspaceDTO) {
    const isolation = record.backendKind === engine.machine.kind ? engine.machine.isolation : null;
    const isolated = isolation?.isolated ?? false;
    return {
      backend: isolation?.backend ?? record.backendKind,
      isolated,
      // host-unconfined runs agent commands on the host with Berth's privileges.
      trustedOnly: !isolated,
    };
  }

  function describe(record: WorkspaceDTO) {
    const { backendHandle: _handle, ...rest } = record;
    return {
      ...rest,
      ...isolationOf(record),
      idleMs: record.lastActivityAt ? Math.max(0, Date.now() - record.lastActivityAt.getTime()) : null,
    };
  }
}

export type WorkspaceService = ReturnType<typeof createWorkspaceService>;
