import type { Db } from "@/server/db";
import { randomUUID } from "node:crypto";
import type { SecretKey } from "@/server/auth/secrets";
import type { TenantScope } from "@/server/auth/scope";
import { createAgent, getAgent, getAgentModelApiKey, listAgents } from "@/server/modules/agent/agent.data";
import { defaultSystemPrompt } from "@/server/modules/agent/agent.types";
import type { SessionDTO } from "@/server/modules/session/session.types";
import { toAppError } from "@/server/shared/errors";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";
import type { AgentTool, TeamPort } from "@/server/agent/ports";
import { createTeamTools } from "@/server/agent/team-tools";

/**
 * The session service's team operations behind the chat `TeamPort` (agentscope-spec.md §9.6). A worker made
 * by `AgentCreate` is a new agent record (the leader's model settings and key, its own skill partition and
 * MCP scope) with a session bound to the leader's workspace id; an invited agent gets a session under its
 * own isolation rules. Both sessions carry `leaderSessionId`, so deleting the leader purges them too; the
 * worker agent records `createdByLeaderSessionId`, so it is deleted with the leader, the invited agent is not.
 */
export type TeamDeps = {
  /** The process' database client (the Berth root's). */
  db: Db;
  secretKey: SecretKey;
  createSession(
    scope: TenantScope,
    request: { agentId: string; name?: string },
    extra: { leaderSessionId?: string; trustedWorkspaceId?: string },
  ): Promise<{ sessionId: string; workspaceId: string }>;
  /** Starts a turn of a member session and returns its events (the chat service's `send`). */
  send(
    scope: TenantScope,
    input: { sessionId: string; message: string },
  ): Promise<AsyncIterable<TChatTurnEvent>>;
  cancel(sessionId: string): Promise<unknown>;
};

const INVITABLE_LIMIT = 50;

function workerAgentName(name: string): string {
  const safe = name
    .replace(/[^A-Za-z0-9 _.-]/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "")
    .slice(0, 40);
  return `${safe || "worker"}.${randomUUID().slice(0, 8)}`;
}

function teamPortFor(deps: TeamDeps, scope: TenantScope, leader: SessionDTO): TeamPort {
  return {
    async createWorkerSession({ leaderSessionId, workspaceId, name, description }) {
      const leaderAgent = await getAgent(scope, leader.agentId, deps.db);
      const apiKey = await getAgentModelApiKey(scope, leaderAgent.id, deps.secretKey, deps.db);
      const workerName = workerAgentName(name);
      const worker = await createAgent(
        scope,
        {
          name: workerName,
          description,
          // The role the leader gave it is part of its prompt (the team tool says so), as it always was.
          systemPrompt: `${defaultSystemPrompt(workerName)}\n${description.trim()}`,
          modelConfig: leaderAgent.modelConfig,
          modelApiKey: apiKey,
          isolationPolicy: leaderAgent.isolationPolicy,
          // The link that lets session.delete remove this worker with its leader (invited agents have none).
          createdByLeaderSessionId: leaderSessionId,
        },
        deps.secretKey,
        deps.db,
      );
      const { sessionId } = await deps.createSession(
        scope,
        { agentId: worker.id, name },
        { leaderSessionId, trustedWorkspaceId: workspaceId },
      );
      return { sessionId, agentId: worker.id };
    },

    async inviteAgent({ leaderSessionId, agentId }) {
      return deps.createSession(
        scope,
        { agentId, name: `invited by ${leaderSessionId}` },
        { leaderSessionId },
      );
    },

    async runSubTurn({ sessionId, prompt, signal }) {
      const events = await deps.send(scope, { sessionId, message: prompt });
      const onAbort = () => void deps.cancel(sessionId).catch(() => undefined);
      signal?.addEventListener("abort", onAbort, { once: true });
      let text = "";
      let failure: string | null = null;
      try {
        for await (const event of events) {
          if (event.type === "text-delta") text += event.text;
          else if (event.type === "error") failure = event.message;
        }
      } finally {
        signal?.removeEventListener("abort", onAbort);
      }
      signal?.throwIfAborted();
      return { text: failure && text === "" ? `(the member's turn failed: ${failure})` : text };
    },
  };
}

/** Team tools for a leader session (members get none, so teams do not nest). */
export async function teamToolsFor(
  deps: TeamDeps,
  scope: TenantScope,
  session: SessionDTO,
): Promise<AgentTool[]> {
  const { db } = deps;
  if (session.leaderSessionId !== null) return [];
  const page = await listAgents(scope, { limit: INVITABLE_LIMIT }, db);
  const invitableAgents = page.items
    // Another team's workers are not offered: they are deleted with their own leader session.
    .filter((agent) => agent.id !== session.agentId && agent.createdByLeaderSessionId === null)
    .map((agent) => ({ id: agent.id, name: agent.name, description: agent.description }));
  return createTeamTools({
    team: withInternalCausesMasked(teamPortFor(deps, scope, session)),
    leaderSessionId: session.id,
    leaderWorkspaceId: session.workspaceId,
    invitableAgents,
  });
}

/**
 * Team operations run Berth's own services (the database above all): what they throw that is not an
 * AppError is an internal cause (a driver's "Connection terminated unexpectedly", Prisma's invocation
 * text with file paths), so it becomes INTERNAL ("Internal error" for the model and the client).
 */
function withInternalCausesMasked(port: TeamPort): TeamPort {
  const masked =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    (...args: A) =>
      fn(...args).catch((error: unknown) => {
        throw toAppError(error);
      });
  return {
    createWorkerSession: masked((input: Parameters<TeamPort["createWorkerSession"]>[0]) =>
      port.createWorkerSession(input),
    ),
    inviteAgent: masked((input: Parameters<TeamPort["inviteAgent"]>[0]) => port.inviteAgent(input)),
    runSubTurn: masked((input: Parameters<TeamPort["runSubTurn"]>[0]) => port.runSubTurn(input)),
  };
}
