import type { McpToolDescriptor } from "@/server/workspace/mcp/types";
import type { FileReadState } from "@/server/workspace/tools";
import type { AgentTool, OffloaderPort, TurnWorkspacePort } from "./ports";

/**
 * Thin adapters from the workspace engine's real APIs (server/workspace/workspace.ts) to the chat ports, so
 * the agent loop stays independent of the engine's shapes. Typed structurally: the engine's `Workspace`
 * (and its `Offloader`) satisfy these without the chat module importing the class.
 */

/** The part of the engine's `Offloader` / `Workspace` the chat service uses for offload. */
export type EngineOffloader = {
  offloadContext(sessionId: string, messages: readonly object[]): Promise<string>;
  offloadToolResult(sessionId: string, toolCallId: string, output: string): Promise<string>;
};

/** The part of the engine's `Workspace` a turn uses. */
export type EngineWorkspace = EngineOffloader & {
  getInstructions(): string;
  listTools(options?: {
    readState?: FileReadState | null;
    acceptedMediaTypes?: readonly string[];
    env?: Readonly<Record<string, string>>;
  }): AgentTool[];
  listMcpTools(scope: { agentId: string; sessionId: string }): Promise<McpToolDescriptor[]>;
  /** The session's MCP tools plus those of the agent's shared scope (agentId, ""). */
  listSessionMcpTools(scope: { agentId: string; sessionId: string }): Promise<McpToolDescriptor[]>;
  /** The MCP servers running now for the session and its agent's shared scope, starting none. */
  runningMcps(scope: { agentId: string; sessionId: string }): string[];
  listSkills(
    agentId?: string | null,
  ): Promise<{ skills: ReadonlyArray<{ name: string; description: string }> }>;
  readSkill(name: string, agentId?: string | null): Promise<{ content: string }>;
};

export function offloaderPort(engine: EngineOffloader): OffloaderPort {
  return {
    offloadToolResult: (sessionId, toolCallId, text) =>
      engine.offloadToolResult(sessionId, safeFileSegment(toolCallId), text),
    offloadContext: (sessionId, messages) => engine.offloadContext(sessionId, messages),
  };
}

/**
 * A turn's view of a workspace. `readState` is the session's Read-before-Write bookkeeping: keep ONE per
 * session (across turns) so the model need not re-read a file it read in an earlier turn; omitted, each
 * turn starts with an empty one. `acceptedMediaTypes` (the agent's model config) lets Read attach images
 * and PDFs of those types; omitted, it refuses images and extracts PDF text. `env`: the environment
 * variables of the turn's Bash commands (the session's, over its agent's).
 */
export function turnWorkspacePort(
  workspace: EngineWorkspace,
  options: {
    readState?: FileReadState;
    acceptedMediaTypes?: readonly string[];
    env?: Readonly<Record<string, string>>;
  } = {},
): TurnWorkspacePort {
  return {
    ...offloaderPort(workspace),
    listTools: () =>
      workspace.listTools({
        ...(options.readState ? { readState: options.readState } : {}),
        ...(options.acceptedMediaTypes ? { acceptedMediaTypes: options.acceptedMediaTypes } : {}),
        ...(options.env ? { env: options.env } : {}),
      }),
    // A turn sees the agent's shared MCPs as well as its session's own: what an admin adds for the agent
    // applies to all its sessions.
    listMcpTools: (scope) => workspace.listSessionMcpTools(scope),
    listSkills: async (agentId) =>
      (await workspace.listSkills(agentId)).skills.map(({ name, description }) => ({ name, description })),
    readSkill: async (agentId, name) => (await workspace.readSkill(name, agentId)).content,
    getInstructions: () => workspace.getInstructions(),
  };
}

/**
 * Tool call ids come from the provider. The engine accepts only `[A-Za-z0-9_.-]` in file names (and no
 * `..`), so anything else is replaced; the engine's `(n)` suffixes keep replaced ids unique.
 */
function safeFileSegment(id: string): string {
  const safe = id
    .replace(/[^A-Za-z0-9_.-]/g, "_")
    .replace(/\.{2,}/g, "_")
    .replace(/^[^A-Za-z0-9_]/, "_");
  return safe === "" ? "call" : safe.slice(0, 128);
}
