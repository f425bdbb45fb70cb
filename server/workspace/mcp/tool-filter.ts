import type { McpToolInfo, TMcpDeclaration } from "@/server/workspace/mcp/types";

/**
 * The reference's allow/deny rule: with `enable_tools` set only those tools exist; `disable_tools` then
 * removes names. The schema forbids overlaps, so the order of the two checks does not matter.
 */
export function isMcpToolAllowed(declaration: TMcpDeclaration, tool: string): boolean {
  if (declaration.enable_tools !== null && !declaration.enable_tools.includes(tool)) return false;
  if (declaration.disable_tools?.includes(tool)) return false;
  return true;
}

export function filterMcpTools(declaration: TMcpDeclaration, tools: McpToolInfo[]): McpToolInfo[] {
  return tools.filter((tool) => isMcpToolAllowed(declaration, tool.name));
}

/** The LLM-facing tool name, unique across MCPs and builtin tools. */
export function mcpToolName(mcpName: string, tool: string): string {
  return `mcp__${mcpName}__${tool}`;
}
