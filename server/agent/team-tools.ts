import { z } from "zod";
import type { AgentTool, TeamPort } from "./ports";
import { guarded, invalidInput } from "./tool-failures";

/**
 * Team tools (agentscope-spec.md §9.6). `AgentCreate` spawns a worker that SHARES the leader's workspace:
 * the leader session's workspace id is handed to the session service explicitly, so the worker sees the
 * same files while its MCP scope and skill partition stay its own. `AgentInvite` borrows an existing
 * agent, which keeps its own workspace under its own isolation rules. Both deliver `prompt` as the member's
 * first message and return the member's answer (the member's turn runs to completion inside the tool call
 * and is cancelled with the leader's turn).
 */
export type InvitableAgent = { id: string; name: string; description: string };

export type TeamToolsInput = {
  team: TeamPort;
  leaderSessionId: string;
  leaderWorkspaceId: string;
  /** Agents the leader may borrow; `AgentInvite` is offered only when there is at least one. */
  invitableAgents?: InvitableAgent[];
};

const ZAgentCreateInput = z.object({
  name: z
    .string()
    .trim()
    .min(1)
    .max(64)
    .refine((name) => !name.includes("@"), "A member name cannot contain '@'"),
  description: z.string().trim().min(1),
  prompt: z.string().trim().min(1),
});

const ZAgentInviteInput = z.object({ target: z.string().min(1), prompt: z.string().trim().min(1) });

/** How an invitable agent is shown and addressed: `<name>@<first 8 characters of its id>`. */
export function inviteHandle(agent: Pick<InvitableAgent, "id" | "name">): string {
  return `${agent.name}@${agent.id.slice(0, 8)}`;
}

export function createTeamTools(input: TeamToolsInput): AgentTool[] {
  const tools = [createAgentCreateTool(input)];
  if ((input.invitableAgents ?? []).length > 0) tools.push(createAgentInviteTool(input));
  return tools;
}

function createAgentCreateTool(input: TeamToolsInput): AgentTool {
  return {
    name: "AgentCreate",
    description:
      "Adds a new worker member to your team and gives it its first task. The worker shares your workspace " +
      "(the same files and working directory), so you can hand it file paths. It runs the task right away " +
      "and this tool returns its answer. Member names must be unique within the team.",
    inputSchema: {
      type: "object",
      properties: {
        name: { type: "string", description: 'Short unique identifier, e.g. "researcher" or "coder-1"' },
        description: {
          type: "string",
          description: "One sentence on the member's role; part of its system prompt",
        },
        prompt: {
          type: "string",
          description: "The first task, concrete and self-contained: context, constraints and deliverables",
        },
      },
      required: ["name", "description", "prompt"],
      additionalProperties: false,
    },
    async execute(raw, { signal }) {
      const parsed = ZAgentCreateInput.safeParse(raw);
      if (!parsed.success) return invalidInput("AgentCreate", parsed.error);
      const { name, description, prompt } = parsed.data;
      return guarded(signal, async () => {
        const worker = await input.team.createWorkerSession({
          leaderSessionId: input.leaderSessionId,
          workspaceId: input.leaderWorkspaceId,
          name,
          description,
        });
        const answer = await input.team.runSubTurn({
          sessionId: worker.sessionId,
          prompt,
          ...(signal ? { signal } : {}),
        });
        return {
          content: `Member "${name}" (session ${worker.sessionId}) replied:\n\n${answer.text}`,
          isError: false,
          metadata: { memberSessionId: worker.sessionId, memberAgentId: worker.agentId },
        };
      });
    },
  };
}

function createAgentInviteTool(input: TeamToolsInput): AgentTool {
  const pool = input.invitableAgents ?? [];
  const byHandle = new Map(pool.map((agent) => [inviteHandle(agent), agent]));
  return {
    name: "AgentInvite",
    description: [
      "Borrows one of the user's existing agents into your team and gives it a first task; returns its answer.",
      "Unlike AgentCreate, the invited agent has its OWN workspace: do not assume it sees your files, send",
      "self-contained messages. Available agents:",
      ...pool.map((agent) => `- ${inviteHandle(agent)}: ${agent.description}`),
    ].join("\n"),
    inputSchema: {
      type: "object",
      properties: {
        target: { type: "string", enum: [...byHandle.keys()], description: "The agent, as <name>@<handle>" },
        prompt: { type: "string", description: "The first task, self-contained" },
      },
      required: ["target", "prompt"],
      additionalProperties: false,
    },
    async execute(raw, { signal }) {
      const parsed = ZAgentInviteInput.safeParse(raw);
      if (!parsed.success) return invalidInput("AgentInvite", parsed.error);
      const agent = byHandle.get(parsed.data.target);
      if (!agent) {
        return {
          content: `Error: unknown agent ${JSON.stringify(parsed.data.target)}. Choose one of: ${[...byHandle.keys()].join(", ")}`,
          isError: true,
        };
      }
      return guarded(signal, async () => {
        const member = await input.team.inviteAgent({
          leaderSessionId: input.leaderSessionId,
          agentId: agent.id,
        });
        const answer = await input.team.runSubTurn({
          sessionId: member.sessionId,
          prompt: parsed.data.prompt,
          ...(signal ? { signal } : {}),
        });
        return {
          content: `Invited agent ${inviteHandle(agent)} (session ${member.sessionId}) replied:\n\n${answer.text}`,
          isError: false,
          metadata: { memberSessionId: member.sessionId, memberWorkspaceId: member.workspaceId },
        };
      });
    },
  };
}
