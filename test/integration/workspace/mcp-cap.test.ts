import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadEngineConfig } from "@/server/engine/engine-config";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "./harness";

/** The installation's cap on live stateful MCPs reaches every workspace's McpRegistry (issue 9 D, G21). */
const EVERYTHING_ENTRY = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");

describe("BERTH_MAX_LIVE_STATEFUL_MCPS", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;

  beforeAll(async () => {
    h = await startWorkspaceHarness({ maxLiveStatefulMcps: 1 });
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await h.close();
  });

  it("is parsed from the environment (unset or 0: the reference's default)", () => {
    expect(loadEngineConfig({ BERTH_MAX_LIVE_STATEFUL_MCPS: "3" }).maxLiveStatefulMcps).toBe(3);
    expect(loadEngineConfig({}).maxLiveStatefulMcps).toBeNull();
    expect(() => loadEngineConfig({ BERTH_MAX_LIVE_STATEFUL_MCPS: "-1" })).toThrow();
  });

  it("caps live stateful MCPs across the scopes of a workspace: the least recently used one is closed", async () => {
    const { agent, session } = await freshSession(tenant.scope);
    const { workspace } = await h.service.resolveForSession(tenant.scope, session.id);
    expect(workspace.mcpStats().cap).toBe(1);
    const declaration = ZMcpDeclaration.parse({
      name: "everything",
      is_stateful: true,
      mcp_config: { type: "stdio_mcp", command: process.execPath, args: [EVERYTHING_ENTRY, "stdio"] },
    });
    await workspace.addMcp(declaration, { agentId: agent.id, sessionId: "one" });
    await workspace.addMcp(declaration, { agentId: agent.id, sessionId: "two" });
    expect(workspace.mcpStats().liveStateful).toBe(1);
    const statuses = await workspace.mcpStatus({ agentId: agent.id, sessionId: "one" });
    expect(statuses.map((status) => status.state)).toEqual(["running"]);
    expect(workspace.mcpStats().liveStateful).toBe(1);
  });
});
