import { createHash } from "node:crypto";
import type { McpToolDescriptor, McpToolResult } from "@/server/workspace/mcp/types";
import {
  silentLogger,
  type AgentTool,
  type ChatLogger,
  type SkillSummary,
  type TurnWorkspacePort,
} from "./ports";

/**
 * Assembles a turn's tools and system prompt from the session's workspace (agentscope-spec.md §9.5):
 * the builtin tools, the MCP tools of the (agent, session) scope, the skills (names and descriptions in
 * the prompt, a `Skill` tool that reads one on demand), any extra tools (team tools), and the workspace's
 * instructions appended to the system prompt. The MCP registry already leaves out an MCP whose tool
 * listing fails (as the reference's toolkit does); any other failure fails the turn.
 */
export type AssembleToolkitInput = {
  agentId: string;
  sessionId: string;
  baseSystemPrompt: string;
  workspace: TurnWorkspacePort;
  extraTools?: AgentTool[];
  logger?: ChatLogger;
};

export type Toolkit = { tools: AgentTool[]; system: string };

export const SKILL_TOOL_NAME = "Skill";

export async function assembleToolkit(input: AssembleToolkitInput): Promise<Toolkit> {
  const logger = input.logger ?? silentLogger;
  const [builtins, mcpTools, skills, instructions] = await Promise.all([
    input.workspace.listTools(),
    input.workspace.listMcpTools({ agentId: input.agentId, sessionId: input.sessionId }),
    input.workspace.listSkills(input.agentId),
    input.workspace.getInstructions(),
  ]);

  const candidates = [
    ...builtins,
    ...mcpTools.map(mcpDescriptorTool),
    ...(skills.length > 0 ? [createSkillTool(input.workspace, input.agentId, skills)] : []),
    ...(input.extraTools ?? []),
  ];
  const tools: AgentTool[] = [];
  const seen = new Set<string>();
  for (const candidate of candidates) {
    if (seen.has(candidate.name)) {
      logger.warn(
        { sessionId: input.sessionId, tool: candidate.name },
        "duplicate tool name; keeping the first",
      );
      continue;
    }
    seen.add(candidate.name);
    tools.push(candidate);
  }

  const system = [input.baseSystemPrompt, skillsPromptSection(skills), instructions]
    .map((section) => section.trim())
    .filter((section) => section !== "")
    .join("\n");
  return { tools, system };
}

function skillsPromptSection(skills: readonly SkillSummary[]): string {
  if (skills.length === 0) return "";
  const lines = skills.map((skill) => `- ${skill.name}: ${skill.description.replace(/\s+/g, " ").trim()}`);
  return [
    "<skills>",
    `The following skills are available. Before a task that a skill covers, call the ${SKILL_TOOL_NAME} tool ` +
      "with the skill's name to read its instructions, then follow them.",
    ...lines,
    "</skills>",
  ].join("\n");
}

function createSkillTool(
  workspace: Pick<TurnWorkspacePort, "readSkill">,
  agentId: string,
  skills: readonly SkillSummary[],
): AgentTool {
  const names = skills.map((skill) => skill.name);
  return {
    name: SKILL_TOOL_NAME,
    description:
      "Reads the instructions (SKILL.md) of one of your skills. Call it before doing a task that the skill " +
      "covers; the skills are listed in the system prompt.",
    inputSchema: {
      type: "object",
      properties: { name: { type: "string", enum: names, description: "The skill's name" } },
      required: ["name"],
      additionalProperties: false,
    },
    async execute(input) {
      const name = (input as { name?: unknown } | null)?.name;
      if (typeof name !== "string" || !names.includes(name)) {
        return {
          content: `Error: unknown skill ${JSON.stringify(name)}. Available: ${names.join(", ")}`,
          isError: true,
        };
      }
      return { content: await workspace.readSkill(agentId, name), isError: false };
    },
  };
}

/** OpenAI function names: `^[a-zA-Z0-9_-]{1,64}$`. */
const MAX_TOOL_NAME = 64;

/**
 * Makes a tool name acceptable to every OpenAI-compatible provider: invalid characters become `_`, and a
 * name that changed or is too long gets a short hash of the original, so two tools never collide.
 */
export function providerSafeToolName(name: string): string {
  const safe = name.replace(/[^a-zA-Z0-9_-]/g, "_");
  if (safe === name && safe.length <= MAX_TOOL_NAME) return safe;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 8);
  return `${safe.slice(0, MAX_TOOL_NAME - hash.length - 1)}_${hash}`;
}

/** An MCP tool of the registry (`mcp__<mcp>__<tool>`) as an agent tool called with the turn's signal. */
function mcpDescriptorTool(descriptor: McpToolDescriptor): AgentTool {
  return {
    name: providerSafeToolName(descriptor.name),
    description: descriptor.description,
    inputSchema: { type: "object", properties: {}, ...descriptor.inputSchema },
    async execute(input, options) {
      const args = input !== null && typeof input === "object" ? (input as Record<string, unknown>) : {};
      const result = await descriptor.call(args, options.signal ? { signal: options.signal } : {});
      return { content: mcpContentText(result), isError: result.isError };
    },
  };
}

/** MCP content blocks as text: text verbatim, embedded text resources inline, binaries described. */
export function mcpContentText(result: McpToolResult): string {
  const pieces = result.content.map((block) => {
    if (block.type === "text" && typeof block.text === "string") return block.text;
    if (block.type === "resource") {
      const resource = block.resource as { uri?: string; text?: string; mimeType?: string } | undefined;
      if (typeof resource?.text === "string") return resource.text;
      return `[resource ${resource?.uri ?? ""} (${resource?.mimeType ?? "binary"})]`;
    }
    if (block.type === "resource_link") return `[resource link ${String(block.uri)}]`;
    if (block.type === "image" || block.type === "audio") return `[${block.type}: ${String(block.mimeType)}]`;
    return JSON.stringify(block);
  });
  if (pieces.length === 0 && result.structuredContent) return JSON.stringify(result.structuredContent);
  return pieces.join("\n");
}
