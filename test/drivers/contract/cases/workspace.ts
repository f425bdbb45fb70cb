import path from "node:path";
import { afterAll, expect } from "vitest";
import type { LiveMcpClient } from "@/server/workspace/mcp/types";
import { attachThrough } from "@/server/workspace/drivers/driver";
import { Workspace } from "@/server/workspace/workspace";
import type { ContractContext } from "../backend-contract";
import { textOf } from "../support";

const HELLO_SKILL = path.resolve("test/fixtures/skills/hello-skill");

/** Skills, offload and MCP through a Workspace attached through the driver, as the engine builds them. */
export function registerWorkspaceCases(context: ContractContext): void {
  // One Workspace over the suite's workspace for these cases, opened by the first that runs: each case
  // works in scopes and folders of its own, and an open (attach, layout, `.mcp`, skills) is a dozen
  // commands through the driver, seconds each time on the remote drivers.
  let opened: Promise<Workspace> | null = null;
  const open = () =>
    (opened ??= (async () => {
      const workspace = new Workspace({ spec: context.spec, attacher: attachThrough(context.driver) });
      await workspace.initialize();
      return workspace;
    })());
  afterAll(async () => {
    const workspace = await opened?.catch(() => null);
    await workspace?.close().catch(() => undefined);
  });

  context.it(
    "skills: a skill folder from the host installs into the workspace and its script runs there",
    async () => {
      const workspace = await open();
      const installed = await workspace.addSkill(HELLO_SKILL, "agent-a");
      expect(installed.skill.name).toBe("hello");
      const listing = await workspace.listSkills("agent-a");
      expect(listing.skills.map((skill) => skill.name)).toContain("hello");
      const { content } = await workspace.readSkill("hello", "agent-a");
      expect(content).toContain("Run `scripts/hello.sh`.");
      const run = await workspace.machine.exec([
        "sh",
        path.posix.join(installed.skill.path, "scripts/hello.sh"),
      ]);
      expect(run.exitCode).toBe(0);
      expect(run.stdout.toString().length).toBeGreaterThan(0);
    },
  );

  context.it(
    "offload: a large tool result is parked in the session folder and read back through workspace:///",
    async () => {
      const workspace = await open();
      const output = `${"line of a large tool result\n".repeat(40_000)}end`;
      const reference = await workspace.offloadToolResult("session-1", "call_big", output);
      expect(reference).toMatch(/^workspace:\/\/\/sessions\/session-1\/tool_result-call_big/);
      expect(await textOf(await workspace.resolveReference(reference))).toBe(output);
      // The same id again gets its own file (exclusive create picks `(n)`).
      const second = await workspace.offloadToolResult("session-1", "call_big", "again");
      expect(second).not.toBe(reference);
      expect(await textOf(await workspace.resolveReference(second))).toBe("again");
      // The Read tool accepts the reference too.
      const read = workspace.listTools({ readState: null }).find((tool) => tool.name === "Read")!;
      const shown = await read.execute({ file_path: second });
      expect(shown).toMatchObject({ isError: false });
      expect(shown.content).toContain("again");
      await expect(workspace.resolveReference("workspace:///../../etc/passwd")).rejects.toBeTruthy();
    },
  );

  context.it(
    "MCP: a stdio server from npm runs through the driver's gateway path and answers tool calls",
    async () => {
      const workspace = await open();
      expect(workspace.isolated).toBe(context.driver.isolation.isolated);
      const declaration = await context.mcp.install(workspace.machine, "everything");
      const scope = { agentId: "agent-a", sessionId: "mcp-1" };
      await workspace.addMcp(declaration, scope);
      const tools = await workspace.listMcpTools(scope);
      const echo = tools.find((tool) => tool.toolName === "echo")!;
      expect(echo.name).toBe("mcp__everything__echo");
      expect(await echo.call({ message: `via ${context.name}` })).toMatchObject({
        content: [{ type: "text", text: `Echo: via ${context.name}` }],
      });
    },
  );

  context.it("MCP: two sessions of a stateful server get two instances whose state stays apart", async () => {
    const workspace = await open();
    const declaration = await context.mcp.install(workspace.machine, "counter");
    const first = { agentId: "agent-a", sessionId: "state-1" };
    const second = { agentId: "agent-a", sessionId: "state-2" };
    const one = await workspace.addMcp(declaration, first);
    const two = await workspace.addMcp(declaration, second);
    // `toggle-simulated-logging` is per-instance state: "Started" on a fresh server, "Stopped" on the next call.
    const toggle = async (client: LiveMcpClient) =>
      JSON.stringify((await client.callTool("toggle-simulated-logging", {})).content);
    expect(await toggle(one)).toContain("Started");
    expect(await toggle(two)).toContain("Started");
    expect(await toggle(one)).toContain("Stopped");
    expect(await toggle(two)).toContain("Stopped");
  });
}
