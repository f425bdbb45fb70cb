import type { TenantScope } from "@/server/auth/scope";
import { deleteAgent, getAgent, listWorkerAgentIds } from "@/server/modules/agent/agent.data";
import { audited } from "@/server/modules/agent/audited";
import { listSessions } from "@/server/modules/session/session.data";
import { listWorkspaces } from "@/server/modules/workspace/workspace.data";
import { isAppError } from "@/server/shared/errors";

/** What removing an agent needs: the workspace service's `agent.purge` producer (the job runs in the workers). */
export type AgentRemovalDeps = {
  enqueueAgentPurge(
    scope: TenantScope,
    input: { agentId: string; workspaceIds: string[] },
  ): Promise<{ jobId: string | null }>;
  onAuditFailure?: (error: unknown) => void;
};

export type AgentRemoval = {
  agentId: string;
  workspaceIds: string[];
  purgeJobId: string | null;
  /** Team workers its sessions had created (`AgentCreate`), removed with it. */
  workerAgentIds: string[];
};

/** Every workspace the agent has used (its sessions' workspaces and its bindings) and its session ids. */
async function footprintOf(scope: TenantScope, agentId: string) {
  const workspaceIds = new Set<string>();
  const sessionIds: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await listSessions(scope, { agentId, limit: 200, ...(cursor ? { cursor } : {}) });
    for (const session of page.items) {
      workspaceIds.add(session.workspaceId);
      sessionIds.push(session.id);
    }
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  do {
    const page = await listWorkspaces(scope, { agentId, limit: 200, ...(cursor ? { cursor } : {}) });
    for (const workspace of page.items) workspaceIds.add(workspace.id);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return { workspaceIds: [...workspaceIds], sessionIds };
}

/** A worker already gone (a concurrent delete) is what we wanted anyway. */
function unlessNotFound(error: unknown): null {
  if (isAppError(error) && error.code === "NOT_FOUND") return null;
  throw error;
}

/**
 * Deletes an agent, audited as `agent.delete` (with `cause` in the details when it is not a direct request):
 * its sessions and messages go with it (foreign-key cascade), then `agent.purge` removes its skill partition
 * and MCP scopes from every workspace it used (collected first). The team workers its sessions created are
 * removed the same way first, since their leader sessions are about to disappear; invited agents are not.
 */
export async function removeAgent(
  scope: TenantScope,
  agentId: string,
  deps: AgentRemovalDeps,
  cause: Record<string, unknown> = {},
  seen: Set<string> = new Set(),
): Promise<AgentRemoval> {
  seen.add(agentId);
  return audited(
    scope,
    { action: "agent.delete", targetType: "agent", targetId: agentId, details: cause },
    async () => {
      await getAgent(scope, agentId);
      const { workspaceIds, sessionIds } = await footprintOf(scope, agentId);
      const workerAgentIds = (await listWorkerAgentIds(scope, sessionIds)).filter((id) => !seen.has(id));
      for (const workerId of workerAgentIds) {
        await removeAgent(
          scope,
          workerId,
          deps,
          { cause: "leader-agent-deleted", leaderAgentId: agentId },
          seen,
        ).catch(unlessNotFound);
      }
      await deleteAgent(scope, agentId);
      const { jobId } = await deps.enqueueAgentPurge(scope, { agentId, workspaceIds });
      return { agentId, workspaceIds, purgeJobId: jobId, workerAgentIds };
    },
    deps.onAuditFailure,
    (result) => ({
      details: {
        workspaceIds: result.workspaceIds,
        purgeJobId: result.purgeJobId,
        ...(result.workerAgentIds.length > 0 ? { workerAgentIds: result.workerAgentIds } : {}),
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
  const workerAgentIds = await listWorkerAgentIds(scope, leaderSessionIds);
  for (const workerId of workerAgentIds) {
    await removeAgent(scope, workerId, deps, cause).catch(unlessNotFound);
  }
  return workerAgentIds;
}
