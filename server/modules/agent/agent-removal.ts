import type { Db } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import { deleteAgent, getAgent, listWorkerAgentIds } from "@/server/modules/agent/agent.data";
import { audited } from "@/server/modules/audit/audited";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { recordDeletedSessions } from "@/server/modules/session/deleted-session.data";
import { listSessions } from "@/server/modules/session/session.data";
import { listWorkspaces } from "@/server/modules/workspace/workspace-list.data";
import { isAppError } from "@/server/shared/errors";

/**
 * What removing an agent needs: the workspace service's `session.purge` and `agent.purge` producers (the
 * jobs run in the workers, so they reach every backend, Docker included).
 */
export type AgentRemovalDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  /** Where changes are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
  enqueueSessionPurge(
    scope: TenantScope,
    input: { workspaceId: string; agentId: string; sessionIds: string[] },
  ): Promise<{ jobId: string | null }>;
  enqueueAgentPurge(
    scope: TenantScope,
    input: { agentId: string; workspaceIds: string[] },
  ): Promise<{ jobId: string | null }>;
  /** The workspace service's stop request (READY → STOPPING, then `workspace.stop`). */
  requestStop?: (
    scope: TenantScope,
    workspaceId: string,
    options: { force?: boolean; reason?: string },
  ) => Promise<{ state: string; jobId: string | null }>;
  onAuditFailure?: (error: unknown) => void;
};

export type AgentRemoval = {
  agentId: string;
  workspaceIds: string[];
  purgeJobId: string | null;
  /** The `session.purge` jobs for its sessions' offload files and MCP scopes, one per workspace (and batch). */
  sessionPurgeJobIds: (string | null)[];
  /** Team workers its sessions had created (`AgentCreate`), removed with it. */
  workerAgentIds: string[];
  /** Its own workspaces (bound to it) that were asked to stop with it, and the `workspace.stop` jobs. */
  stoppedWorkspaceIds: string[];
};

/** The most sessions one `session.purge` job takes (its payload's cap). */
const SESSION_PURGE_BATCH = 1_000;

/**
 * Every workspace the agent has used (its sessions' workspaces and its bindings), its session ids, and
 * those ids grouped by workspace (for the offload purge).
 */
async function footprintOf(scope: TenantScope, agentId: string, db: Db) {
  const workspaceIds = new Set<string>();
  const ownWorkspaceIds: string[] = [];
  const sessionIds: string[] = [];
  const sessionsByWorkspace = new Map<string, string[]>();
  let cursor: string | undefined;
  do {
    const page = await listSessions(scope, { agentId, limit: 200, ...(cursor ? { cursor } : {}) }, db);
    for (const session of page.items) {
      workspaceIds.add(session.workspaceId);
      sessionIds.push(session.id);
      const group = sessionsByWorkspace.get(session.workspaceId);
      if (group) group.push(session.id);
      else sessionsByWorkspace.set(session.workspaceId, [session.id]);
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  do {
    const page = await listWorkspaces(scope, { agentId, limit: 200, ...(cursor ? { cursor } : {}) }, db);
    for (const workspace of page.items) {
      workspaceIds.add(workspace.id);
      if (workspace.state === "READY" || workspace.state === "STOPPING") ownWorkspaceIds.push(workspace.id);
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return { workspaceIds: [...workspaceIds], ownWorkspaceIds, sessionIds, sessionsByWorkspace };
}

/**
 * Stops the workspaces bound to the deleted agent (its PER_AGENT / PER_SESSION ones), forced: every session
 * that held a lease on them went with the agent, so nothing is left to wait for, and waiting for the idle
 * sweep would keep a machine running (and metered) for nobody. Workspaces it only shared (another agent's,
 * a user's PER_USER one) stay as they are. A stop that cannot be requested is logged in the audit by
 * requestStop and does not undo the deletion.
 */
async function stopOwnWorkspaces(
  scope: TenantScope,
  agentName: string,
  workspaceIds: readonly string[],
  deps: AgentRemovalDeps,
): Promise<string[]> {
  const requestStop = deps.requestStop;
  if (!requestStop) return [];
  const stopped: string[] = [];
  for (const workspaceId of workspaceIds) {
    const outcome = await requestStop(scope, workspaceId, {
      force: true,
      reason: `agent "${agentName}" was deleted`,
    }).catch(() => null);
    if (outcome?.jobId) stopped.push(workspaceId);
  }
  return stopped;
}

/** A worker already gone (a concurrent delete) is what we wanted anyway. */
function unlessNotFound(error: unknown): null {
  if (isAppError(error) && error.code === "NOT_FOUND") return null;
  throw error;
}

/**
 * Deletes an agent, audited as `agent.delete` (with `cause` in the details when it is not a direct request):
 * its sessions and messages go with it (foreign-key cascade), then, as the reference's `delete_agent` does
 * (`delete_session` for each session, then `purge_agent`), `session.purge` removes its sessions' offload
 * files (`sessions/<sid>/`: context.jsonl, tool results) and MCP scopes from their workspaces, and
 * `agent.purge` its skill partition and MCP scopes from every workspace it used (all collected first). The team workers its sessions created are
 * removed the same way first, since their leader sessions are about to disappear; invited agents are not.
 */
export async function removeAgent(
  scope: TenantScope,
  agentId: string,
  deps: AgentRemovalDeps,
  cause: Record<string, unknown> = {},
  seen: Set<string> = new Set(),
): Promise<AgentRemoval> {
  const { db } = deps;
  seen.add(agentId);
  return audited(
    deps.audit,
    scope,
    { action: "agent.delete", targetType: "agent", targetId: agentId, details: cause },
    async () => {
      const agent = await getAgent(scope, agentId, db);
      const { workspaceIds, ownWorkspaceIds, sessionIds, sessionsByWorkspace } = await footprintOf(
        scope,
        agentId,
        db,
      );
      const workerAgentIds = (await listWorkerAgentIds(scope, sessionIds, db)).filter((id) => !seen.has(id));
      for (const workerId of workerAgentIds) {
        await removeAgent(
          scope,
          workerId,
          deps,
          { cause: "leader-agent-deleted", leaderAgentId: agentId },
          seen,
        ).catch(unlessNotFound);
      }
      // Before the rows go: an open tab's Send on one of its sessions is told the agent was deleted.
      await recordDeletedSessions(scope, { agentId, agentName: agent.name, sessionIds }, db);
      await deleteAgent(scope, agentId, db);
      const sessionPurgeJobIds: (string | null)[] = [];
      for (const [workspaceId, ids] of sessionsByWorkspace) {
        for (let start = 0; start < ids.length; start += SESSION_PURGE_BATCH) {
          const batch = ids.slice(start, start + SESSION_PURGE_BATCH);
          const { jobId } = await deps.enqueueSessionPurge(scope, {
            workspaceId,
            agentId,
            sessionIds: batch,
          });
          sessionPurgeJobIds.push(jobId);
        }
      }
      const { jobId } = await deps.enqueueAgentPurge(scope, { agentId, workspaceIds });
      const stoppedWorkspaceIds = await stopOwnWorkspaces(scope, agent.name, ownWorkspaceIds, deps);
      return {
        agentId,
        workspaceIds,
        purgeJobId: jobId,
        sessionPurgeJobIds,
        workerAgentIds,
        stoppedWorkspaceIds,
      };
    },
    deps.onAuditFailure,
    (result) => ({
      details: {
        workspaceIds: result.workspaceIds,
        purgeJobId: result.purgeJobId,
        sessionPurgeJobIds: result.sessionPurgeJobIds,
        ...(result.workerAgentIds.length > 0 ? { workerAgentIds: result.workerAgentIds } : {}),
        ...(result.stoppedWorkspaceIds.length > 0 ? { stoppedWorkspaceIds: result.stoppedWorkspaceIds } : {}),
      },
    }),
  );
}

/**
 * Removes the team workers that these (leader) sessions created, each like `agent.delete` and audited with
 * the leader session as its cause. Call it before the sessions themselves are deleted.
 */
export async function removeWorkerAgentsOf(
  scope: TenantScope,
  leaderSessionIds: string[],
  deps: AgentRemovalDeps,
  cause: Record<string, unknown>,
): Promise<string[]> {
  const { db } = deps;
  const workerAgentIds = await listWorkerAgentIds(scope, leaderSessionIds, db);
  for (const workerId of workerAgentIds) {
    await removeAgent(scope, workerId, deps, cause).catch(unlessNotFound);
  }
  return workerAgentIds;
}
