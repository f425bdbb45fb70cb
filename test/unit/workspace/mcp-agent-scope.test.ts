import { afterEach, describe, expect, it } from "vitest";
import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";
import { McpRegistry } from "@/server/workspace/mcp/mcp-registry";
import { ZMcpDeclaration, type McpScope } from "@/server/workspace/mcp/types";
import { RecordingConnector, everythingMcp } from "./support/mcp-servers";

/**
 * The registry's answers to issue 9 D: the agent's shared scope reaches its sessions, an agent's own default
 * MCPs replace the workspace's for its scopes, and `status` tells running from failed (with the error).
 * Real MCP servers from npm (server-everything over stdio); a non-persistent registry.
 */
const SESSION: McpScope = { agentId: "agent-a", sessionId: "s1" };
const AGENT: McpScope = { agentId: "agent-a", sessionId: "" };

let registries: McpRegistry[] = [];
function makeRegistry(defaults: Parameters<typeof everythingMcp>[0][] = []) {
  const connector = new RecordingConnector(new LocalMcpConnector({ defaultCallTimeoutMs: 20_000 }));
  const registry = new McpRegistry({ connector, defaultMcps: defaults.map((name) => everythingMcp(name)) });
  registries.push(registry);
  return { registry, connector };
}
const broken = (name: string) =>
  ZMcpDeclaration.parse({
    name,
    is_stateful: true,
    mcp_config: { type: "stdio_mcp", command: "/nonexistent/berth-no-such-mcp" },
  });
const mcpNames = (tools: { mcpName: string }[]) => [...new Set(tools.map((tool) => tool.mcpName))];

afterEach(async () => {
  await Promise.all(registries.map((registry) => registry.closeAll()));
  registries = [];
});

describe("McpRegistry agent scope, agent defaults and status", { timeout: 120_000 }, () => {
  it("a session's turn gets the agent scope's MCPs; its own declaration wins a name clash", async () => {
    const { registry } = makeRegistry();
    await registry.add(everythingMcp("shared"), AGENT);
    await registry.add(everythingMcp("clash"), AGENT);
    await registry.add(everythingMcp("clash", { enable_tools: ["echo"] }), SESSION);
    const tools = await registry.sessionTools(SESSION);
    expect(mcpNames(tools).sort()).toEqual(["clash", "shared"]);
    // "clash" comes from the session (only echo enabled there), not from the agent scope.
    expect(tools.filter((tool) => tool.mcpName === "clash").map((tool) => tool.toolName)).toEqual(["echo"]);
    // The agent scope's "clash" was never started for the session's sake.
    expect(registry.stats().live).toBe(3);
    // Another session of another agent does not see it.
    expect(await registry.sessionTools({ agentId: "agent-b", sessionId: "s1" })).toEqual([]);
  });

  it("does not start the workspace defaults twice for a session and its agent scope", async () => {
    const { registry, connector } = makeRegistry(["base"]);
    const tools = await registry.sessionTools(SESSION);
    expect(mcpNames(tools)).toEqual(["base"]);
    expect(connector.connects.length).toBe(1);
  });

  it("an agent's own defaults replace the workspace's for its scopes only, and changing them lets go of old instances", async () => {
    const { registry } = makeRegistry(["base"]);
    registry.setAgentDefaults("agent-a", [everythingMcp("agent-kit")]);
    expect(registry.declarations(SESSION).map((d) => d.name)).toEqual(["agent-kit"]);
    expect(registry.declarations({ agentId: "agent-b", sessionId: "s1" }).map((d) => d.name)).toEqual([
      "base",
    ]);
    await registry.list(SESSION);
    expect(registry.stats().live).toBe(1);
    registry.setAgentDefaults("agent-a", [everythingMcp("other-kit")]);
    expect(registry.stats().live).toBe(0);
    registry.setAgentDefaults("agent-a", null);
    expect(registry.declarations(SESSION).map((d) => d.name)).toEqual(["base"]);
  });

  it("status: running with tools, failed with the start error (retried and still failed), stopped before start", async () => {
    const { registry } = makeRegistry();
    registry.setAgentDefaults("agent-a", [everythingMcp("good"), broken("bad")]);
    const statuses = await registry.status(SESSION);
    const byName = Object.fromEntries(statuses.map((status) => [status.declaration.name, status]));
    expect(byName.good).toMatchObject({ state: "running", error: null, failedAt: null });
    expect(byName.good!.tools.map((tool) => tool.toolName)).toContain("echo");
    expect(byName.bad).toMatchObject({ state: "failed", tools: [] });
    expect(byName.bad!.error).toMatch(/\S/);
    expect(typeof byName.bad!.failedAt).toBe("number");
    await registry.closeAll();
    expect(registry.declarations(SESSION)).toHaveLength(2);
  });
});
