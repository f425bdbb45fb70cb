import type { Db } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import { agentNotFound } from "@/server/modules/agent/agent.data";
import type { IsolationPolicy } from "@/server/modules/agent/agent.types";
import { type AgentRemovalDeps, removeWorkerAgentsOf } from "@/server/modules/agent/agent-removal";
import { audited } from "@/server/modules/audit/audited";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { announceChange } from "@/server/modules/live/change-feed";
import {
  createSession,
  deleteSession,
  findSessionByCreateKey,
  getSession,
  listSessions,
  sessionNotFound,
  updateSession,
} from "@/server/modules/session/session.data";
import {
  type TSessionCreateRequest,
  type TSessionUpdateRequest,
  ZSessionCreateRequest,
  ZSessionListRequest,
  ZSessionUpdateRequest,
} from "@/server/modules/session/session.schema";
import {
  assignSessionWorkspaceId,
  legacySessionWorkspaceId,
  mayShareWorkspace,
  workspaceRefusal,
  workspaceRefusalError,
} from "@/server/modules/session/session.policy";
import type { SessionDTO } from "@/server/modules/session/session.types";
import type { QuotaDeps } from "@/server/modules/quota/quota.service";
import { effectiveDefaultIsolation } from "@/server/modules/tenant/tenant-policy";
import { getWorkspaceOrNull } from "@/server/modules/workspace/workspace.data";
import type { BackendPreferences } from "@/server/modules/workspace/workspace-backend.data";
import { readWorkspaceDefaults } from "@/server/modules/workspace/workspace-context.data";
import type { TUpsertWorkspaceInput } from "@/server/modules/workspace/workspace.types";
import { assertKeyInWindow, isCreateKeyTaken, scopedCreateKey } from "@/server/shared/idempotency";
import { parseInput } from "@/server/shared/parse-input";
import type { z } from "zod";

/** What the session service needs from the workspace service (H8): bindings and the purge producer. */
type SessionWorkspacePort = {
  /** The binding row a new session's workspace gets (written by session.data in the session's transaction). */
  bindingFor(input: {
    workspaceId: string;
    agentId: string;
    userId: string | null;
    isolationPolicy: IsolationPolicy;
    /** Read with the agent (readWorkspaceDefaults), so the binding needs no read of its own. */
    backendPreferences: BackendPreferences;
  }): TUpsertWorkspaceInput;
  enqueueSessionPurge(
    scope: TenantScope,
    input: { workspaceId: string; agentId: string; sessionIds: string[] },
  ): Promise<{ jobId: string | null }>;
  /** For the team workers deleted with their leader session (see removeAgent). */
  enqueueAgentPurge(
    scope: TenantScope,
    input: { agentId: string; workspaceIds: string[] },
  ): Promise<{ jobId: string | null }>;
  /** Stops a deleted team worker's own workspaces (see removeAgent). */
  requestStop?: AgentRemovalDeps["requestStop"];
};

export type SessionServiceDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  workspaces: SessionWorkspacePort;
  /** The root's quota deps (a session's new binding counts against `totalWorkspaces`), built on first use. */
  quota: () => Pick<QuotaDeps, "config">;
  /** Where changes are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
  /** Cancels a running turn of a session being deleted (the chat service's registry). */
  cancelTurn?: (sessionId: string) => Promise<unknown>;
  onAuditFailure?: (error: unknown) => void;
};

export function createSessionService(deps: SessionServiceDeps) {
  const { db } = deps;
  const onAuditFailure = deps.onAuditFailure ?? (() => undefined);

  /**
   * The session's workspace id, decided once: the requested one, which must be usable by the caller (an
   * existing, not purged, shareable workspace of theirs; anything else is a typed error saying why, never a
   * silent substitute), else the isolation policy's (the agent's own, else the tenant's default policy).
   * The agent's and the tenant's choices (isolation, backend) come in one read.
   */
  async function chooseWorkspace(scope: TenantScope, agentId: string, requested: string | undefined) {
    const defaults = await readWorkspaceDefaults(scope, agentId, db);
    if (!defaults) throw agentNotFound(agentId);
    const backendPreferences = { agent: defaults.agent.backend, tenant: defaults.tenant.defaultBackend };
    if (requested !== undefined) {
      const record = await getWorkspaceOrNull(scope, requested, db);
      const refusal = workspaceRefusal(record, scope);
      if (refusal !== null || !record) throw workspaceRefusalError(requested, refusal ?? "not_found");
      return { workspaceId: record.id, policy: record.isolationPolicy, backendPreferences };
    }
    const policy =
      defaults.agent.isolationPolicy ?? effectiveDefaultIsolation(defaults.tenant.defaultIsolationPolicy);
    // A PER_USER workspace bound before the tenant was part of the id keeps serving its user in this tenant.
    const legacyId = legacySessionWorkspaceId(policy, scope);
    if (legacyId !== null && mayShareWorkspace(await getWorkspaceOrNull(scope, legacyId, db), scope)) {
      return { workspaceId: legacyId, policy, backendPreferences };
    }
    return {
      workspaceId: assignSessionWorkspaceId(policy, scope, agentId),
      policy,
      backendPreferences,
    };
  }

  async function create(
    scope: TenantScope,
    raw: TSessionCreateRequest,
    extra: { leaderSessionId?: string; trustedWorkspaceId?: string } = {},
  ): Promise<{ sessionId: string; workspaceId: string; session: SessionDTO }> {
    const input = parseInput(ZSessionCreateRequest, raw);
    const createKey = input.idempotencyKey ? scopedCreateKey(scope, input.idempotencyKey) : null;
    // A key seen before answers with its session, creating (and auditing) nothing.
    const replayed = async () => {
      const first = createKey ? await findSessionByCreateKey(scope, createKey, db) : null;
      if (!first) return null;
      assertKeyInWindow(first.createdAt);
      return { sessionId: first.id, workspaceId: first.workspaceId, session: first };
    };
    const earlier = await replayed();
    if (earlier) return earlier;
    try {
      const created = await createAudited(scope, input, extra, createKey);
      announceChange(scope.tenantId, {
        topic: "session",
        id: created.sessionId,
        userId: created.session.userId,
      });
      return created;
    } catch (error) {
      // The same key raced in concurrently (two requests in flight): the unique index let one through.
      const winner = isCreateKeyTaken(error) ? await replayed() : null;
      if (winner) return winner;
      throw error;
    }
  }

  function createAudited(
    scope: TenantScope,
    input: z.output<typeof ZSessionCreateRequest>,
    extra: { leaderSessionId?: string; trustedWorkspaceId?: string },
    createKey: string | null,
  ): Promise<{ sessionId: string; workspaceId: string; session: SessionDTO }> {
    return audited(
      deps.audit,
      scope,
      {
        action: "session.create",
        targetType: "session",
        targetId: null,
        details: { agentId: input.agentId, requestedWorkspaceId: input.workspaceId ?? null },
      },
      async () => {
        const chosen = extra.trustedWorkspaceId
          ? { workspaceId: extra.trustedWorkspaceId, policy: null, backendPreferences: null }
          : await chooseWorkspace(scope, input.agentId, input.workspaceId);
        // The session and its (PENDING, not provisioned) binding row land together or not at all: the
        // binding makes the workspace visible and shareable.
        const binding =
          chosen.policy && chosen.backendPreferences
            ? deps.workspaces.bindingFor({
                workspaceId: chosen.workspaceId,
                agentId: input.agentId,
                userId: scope.userId,
                isolationPolicy: chosen.policy,
                backendPreferences: chosen.backendPreferences,
              })
            : undefined;
        const session = await createSession(
          scope,
          {
            agentId: input.agentId,
            workspaceId: chosen.workspaceId,
            name: input.name ?? "",
            ...(input.env ? { env: input.env } : {}),
            createKey,
            ...(extra.leaderSessionId ? { leaderSessionId: extra.leaderSessionId } : {}),
          },
          db,
          binding ? { binding: { workspace: binding, quota: deps.quota() } } : {},
        );
        return { sessionId: session.id, workspaceId: session.workspaceId, session };
      },
      onAuditFailure,
      (result) => ({ targetId: result.sessionId, details: { workspaceId: result.workspaceId } }),
    );
  }

  /** The session and every team-worker session it led, transitively (leader first). */
  async function teamOf(scope: TenantScope, session: SessionDTO): Promise<SessionDTO[]> {
    const team: SessionDTO[] = [session];
    const seen = new Set([session.id]);
    for (let index = 0; index < team.length && team.length < 1_000; index += 1) {
      const leader = team[index]!;
      let cursor: string | undefined;
      do {
        const page = await listSessions(
          scope,
          {
            leaderSessionId: leader.id,
            limit: 200,
            ...(cursor ? { cursor } : {}),
          },
          db,
        );
        for (const worker of page.items) {
          if (seen.has(worker.id)) continue;
          seen.add(worker.id);
          team.push(worker);
        }
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
    }
    return team;
  }

  return {
    create,

    async list(scope: TenantScope, raw: z.input<typeof ZSessionListRequest>) {
      return listSessions(scope, parseInput(ZSessionListRequest, raw), db);
    },

    async get(scope: TenantScope, sessionId: string): Promise<SessionDTO> {
      return getSession(scope, sessionId, db);
    },

    /**
     * Renames the session and/or replaces its environment variables (over its agent's): its next command
     * sees them, a command already running keeps what it started with. Audited with the fields and the
     * variables' names, never their values.
     */
    async update(scope: TenantScope, sessionId: string, raw: TSessionUpdateRequest): Promise<SessionDTO> {
      const patch = parseInput(ZSessionUpdateRequest, raw);
      return audited(
        deps.audit,
        scope,
        {
          action: "session.update",
          targetType: "session",
          targetId: sessionId,
          details: {
            fields: Object.keys(patch).sort(),
            ...(patch.env ? { envNames: Object.keys(patch.env).sort() } : {}),
          },
        },
        async () => {
          // A member changes only their own sessions (as they act only on their workspaces); another
          // member's answers NOT_FOUND, as another tenant's does.
          const current = await getSession(scope, sessionId, db);
          if (scope.role === "member" && current.userId !== scope.userId) throw sessionNotFound(sessionId);
          const session = await updateSession(scope, sessionId, patch, db);
          announceChange(scope.tenantId, { topic: "session", id: session.id, userId: session.userId });
          return session;
        },
        onAuditFailure,
      );
    },

    /**
     * Deletes the session and the team-worker sessions it led (rows and messages), then enqueues one
     * `session.purge` per workspace involved, leader's first, so their MCP scopes and offload files go too
     * (reference bug #2288: the workers' were left behind). The worker agents the team created with
     * `AgentCreate` are deleted first, like `agent.delete` (audited, `agent.purge`); invited agents stay.
     */
    async delete(scope: TenantScope, sessionId: string) {
      return audited(
        deps.audit,
        scope,
        { action: "session.delete", targetType: "session", targetId: sessionId },
        async () => {
          const session = await getSession(scope, sessionId, db);
          const team = await teamOf(scope, session);
          const cancelTurn = deps.cancelTurn;
          if (cancelTurn) await Promise.all(team.map((member) => cancelTurn(member.id)));
          // Before the sessions: the worker agents' footprint (their workspaces) is read from their sessions.
          const workerAgentIds = await removeWorkerAgentsOf(
            scope,
            team.map((member) => member.id),
            {
              db,
              audit: deps.audit,
              enqueueSessionPurge: (...args) => deps.workspaces.enqueueSessionPurge(...args),
              enqueueAgentPurge: (...args) => deps.workspaces.enqueueAgentPurge(...args),
              ...(deps.workspaces.requestStop ? { requestStop: deps.workspaces.requestStop } : {}),
              onAuditFailure,
            },
            { cause: "leader-session-deleted", leaderSessionId: sessionId },
          );
          for (const member of [...team].reverse()) {
            // A worker agent's sessions are already gone with it (cascade).
            await deleteSession(scope, member.id, db).catch((error: unknown) => {
              if ((error as { code?: string }).code !== "NOT_FOUND") throw error;
            });
          }
          const byWorkspace = new Map<string, { agentId: string; sessionIds: string[] }>();
          for (const member of team) {
            const group = byWorkspace.get(member.workspaceId);
            if (group) group.sessionIds.push(member.id);
            else byWorkspace.set(member.workspaceId, { agentId: member.agentId, sessionIds: [member.id] });
          }
          const jobIds: (string | null)[] = [];
          for (const [workspaceId, group] of byWorkspace) {
            const { jobId } = await deps.workspaces.enqueueSessionPurge(scope, { workspaceId, ...group });
            jobIds.push(jobId);
          }
          for (const member of team) {
            announceChange(scope.tenantId, { topic: "session", id: member.id, userId: member.userId });
          }
          return { sessionIds: team.map((member) => member.id), purgeJobIds: jobIds, workerAgentIds };
        },
        onAuditFailure,
        (result) => ({ details: result }),
      );
    },
  };
}

export type SessionService = ReturnType<typeof createSessionService>;
