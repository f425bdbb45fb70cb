import type { ModelMessage } from "ai";
import type { McpToolDescriptor } from "@/server/workspace/mcp/types";

/**
 * The ports of the chat service: what the agent loop needs from the workspace engine, the MCP registry,
 * skills and the session/team services. They mirror the engine's own types structurally (a builtin tool
 * from `server/workspace/tools` IS an `AgentTool`; MCP tools are the registry's descriptors), so the loop runs
 * against the real engine, and unit tests can hand in plain objects.
 */

/** A tool result as every tool returns it. Errors are results (`isError: true`), not exceptions. */
export type AgentToolResult = {
  content: string;
  isError: boolean;
  /** Tool-specific facts for the UI (diff, exit code, ...); never shown to the model. */
  metadata?: Record<string, unknown>;
  /** Binary attachments (images, PDFs). Described to the model by media type; not persisted inline. */
  attachments?: Array<{ type: "data"; mediaType: string; base64: string; name?: string }>;
};

/** Same shape as `BuiltinTool` in server/workspace/tools/types.ts, with any name. */
export type AgentTool = {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the input object. */
  readonly inputSchema: Record<string, unknown>;
  /** Must honour `signal`: cancelling a turn aborts the tool that is running. */
  execute(input: unknown, options: { signal?: AbortSignal }): Promise<AgentToolResult>;
};

/**
 * Where the loop parks large content (agentscope-spec.md §4). Implemented by the workspace. Both methods
 * return a reference the model can use later (`workspace:///sessions/<sid>/...`).
 */
export interface OffloaderPort {
  offloadToolResult(sessionId: string, toolCallId: string, text: string): Promise<string>;
  offloadContext(sessionId: string, messages: ModelMessage[]): Promise<string>;
}

export type SkillSummary = { name: string; description: string };

/**
 * Everything a turn takes from the session's workspace, resolved through the workspace manager with the
 * session's stored workspace id.
 */
export interface TurnWorkspacePort extends OffloaderPort {
  /** Bash, Read, Write, Edit, Glob, Grep. */
  listTools(): AgentTool[] | Promise<AgentTool[]>;
  /**
   * The MCP tools of the (agent, session) scope, named `mcp__<mcp>__<tool>` (Workspace.listMcpTools). An MCP
   * whose listing fails is left out by the registry.
   */
  listMcpTools(scope: { agentId: string; sessionId: string }): Promise<McpToolDescriptor[]>;
  listSkills(agentId: string): Promise<SkillSummary[]>;
  /** The text of `<skill>/SKILL.md` in the agent's partition. Rejects with AppError NOT_FOUND. */
  readSkill(agentId: string, name: string): Promise<string>;
  getInstructions(): string | Promise<string>;
}

/** Warnings the loop and toolkit report (e.g. an MCP whose tool listing failed). Never gets secrets. */
export type ChatLogger = {
  warn(facts: Record<string, unknown>, message: string): void;
};

export const silentLogger: ChatLogger = { warn: () => undefined };

/**
 * Team operations (agentscope-spec.md §9.6), implemented by the session service.
 * - `createWorkerSession`: a new session for a worker agent that SHARES the leader's workspace (the
 *   leader's workspace id is passed explicitly); the worker has its own MCP scope and skill partition.
 * - `inviteAgent`: borrows an existing agent; its session gets the invited agent's own workspace under that
 *   agent's isolation rules (its first session's workspace, else a newly assigned one).
 * - `runSubTurn`: runs one turn of a team member's session and returns its final text. Must honour
 *   `signal` (cancelling the leader's turn cancels the member's).
 */
export interface TeamPort {
  createWorkerSession(input: {
    leaderSessionId: string;
    workspaceId: string;
    name: string;
    description: string;
  }): Promise<{ sessionId: string; agentId: string }>;
  inviteAgent(input: {
    leaderSessionId: string;
    agentId: string;
  }): Promise<{ sessionId: string; workspaceId: string }>;
  runSubTurn(input: { sessionId: string; prompt: string; signal?: AbortSignal }): Promise<{ text: string }>;
}
