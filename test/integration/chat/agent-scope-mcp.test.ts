import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";
import { sendChat, startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { closeProcessBerth } from "@/server/composition/process-berth";

/**
 * Issue 9 D through the API as one process runs it (routers, chat service, real Postgres/Redis, in-process
 * workers, local workspaces, real MCP servers from npm; only the model is the loopback fake): MCPs added
 * at the agent's shared scope and the agent's default MCPs and skills reach chats of sessions that never
 * added them, and `workspace.mcp.list` says which MCP runs and which failed, and why.
 */
const EVERYTHING_ENTRY = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const everything = (name: string) => ({
  name,
  is_stateful: true,
  mcp_config: { type: "stdio_mcp" as const, command: process.execPath, args: [EVERYTHING_ENTRY, "stdio"] },
});

let h: AgentApiHarness;
let fake: FakeModelServer;

beforeAll(async () => {
  h = await startAgentApiHarness("agentscope");
  fake = await startFakeModel({ apiKey: "sk-scope" });
});

afterAll(async () => {
  await fake.close();
  await h.close();
  await closeProcessBerth();
});

const toolNamesOf = (request: (typeof fake.requests)[number]) =>
  request.tools.map((tool) => tool.function.name);

describe("agent scope, agent defaults and MCP state", () => {
  it("an MCP added at the agent's shared scope is offered and called in a chat of another session", async () => {
    const agent = await h.owner.agent.create({
      ...h.ref,
      name: "Scoped",
      modelConfig: { baseUrl: fake.baseUrl, model: "fake", apiKey: "sk-scope" },
    });
    const first = await h.owner.session.create({ ...h.ref, agentId: agent.id });
    // The admin adds the MCP for the agent (sessionId ""), not for any session.
    await h.owner.workspace.mcp.add({
      ...h.ref,
      workspaceId: first.workspaceId,
      agentId: agent.id,
      sessionId: "",
      declaration: everything("shared"),
    });
    const other = await h.owner.session.create({ ...h.ref, agentId: agent.id });
    expect(other.workspaceId).toBe(first.workspaceId);

    const before = fake.requests.length;
    fake.enqueue(
      {
        kind: "tool-calls",
        calls: [{ id: "c1", name: "mcp__shared__echo", arguments: { message: "via agent scope" } }],
      },
      { kind: "text", text: "done" },
    );
    const events = await sendChat(h.owner, { ...h.ref, sessionId: other.sessionId, message: "echo it" });
    expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
    expect(toolNamesOf(fake.requests[before]!)).toContain("mcp__shared__echo");
    const result = events.find((event) => event.type === "tool-result");
    expect(result).toMatchObject({ toolName: "mcp__shared__echo", isError: false });
    expect((result as { output: string }).output).toContain("via agent scope");

    // The session itself declares nothing: the MCP is the agent's, listed in the agent scope.
    const own = await h.owner.workspace.mcp.list({
      ...h.ref,
      workspaceId: other.workspaceId,
      agentId: agent.id,
      sessionId: other.sessionId,
    });
    expect(own.map((mcp) => mcp.name)).toEqual([]);
  });

  it("applies the agent's default MCPs and skills to a new session's chat; a default that cannot start is reported failed", async () => {
    const agent = await h.owner.agent.create({
      ...h.ref,
      name: "Defaults",
      modelConfig: { baseUrl: fake.baseUrl, model: "fake", apiKey: "sk-scope" },
      defaultMcpConfigs: [
        everything("kit"),
        {
          name: "broken",
          is_stateful: true,
          mcp_config: { type: "stdio_mcp", command: "/nonexistent/berth-no-such-mcp-server" },
        },
      ],
      defaultSkills: [
        {
          kind: "inline",
          name: "house-style",
          description: "How this team writes commit messages",
          instructions: "Write HOUSE-STYLE-COMMITS.",
          files: [{ path: "examples/good.txt", content: "feat: a good one\n" }],
        },
      ],
    });
    const session = await h.owner.session.create({ ...h.ref, agentId: agent.id });

    const before = fake.requests.length;
    fake.enqueue(
      { kind: "tool-calls", calls: [{ id: "s1", name: "Skill", arguments: { name: "house-style" } }] },
      {
        kind: "tool-calls",
        calls: [{ id: "k1", name: "mcp__kit__echo", arguments: { message: "from defaults" } }],
      },
      { kind: "text", text: "ok" },
    );
    const events = await sendChat(h.owner, { ...h.ref, sessionId: session.sessionId, message: "go" });
    expect(events.at(-1)).toMatchObject({ type: "done", status: "completed" });
    const request = fake.requests[before]!;
    expect(toolNamesOf(request)).toEqual(expect.arrayContaining(["Skill", "mcp__kit__echo"]));
    expect(toolNamesOf(request).some((name) => name.startsWith("mcp__broken__"))).toBe(false);
    expect(String(request.messages[0]!.content)).toContain(
      "- house-style: How this team writes commit messages",
    );
    const results = events.filter((event) => event.type === "tool-result") as { output: string }[];
    expect(results[0]!.output).toContain("HOUSE-STYLE-COMMITS");
    expect(results[1]!.output).toContain("from defaults");

    const skills = await h.owner.workspace.skill.list({
      ...h.ref,
      workspaceId: session.workspaceId,
      agentId: agent.id,
    });
    expect(skills.map((skill) => skill.name)).toEqual(["house-style"]);

    const mcps = await h.owner.workspace.mcp.list({
      ...h.ref,
      workspaceId: session.workspaceId,
      agentId: agent.id,
      sessionId: session.sessionId,
    });
    const byName = Object.fromEntries(mcps.map((mcp) => [mcp.name, mcp]));
    expect(byName.kit).toMatchObject({ state: "running", isHealthy: true, error: null });
    expect(byName.kit!.tools.map((tool) => tool.name)).toContain("mcp__kit__echo");
    expect(byName.broken).toMatchObject({ state: "failed", isHealthy: false, tools: [] });
    expect(byName.broken!.error).toMatch(/\S/);
  });

  it("refuses invalid default MCPs and skills with a 400 naming the field", async () => {
    const base = { ...h.ref, modelConfig: { baseUrl: fake.baseUrl, model: "fake" } };
    await expect(
      h.owner.agent.create({
        ...base,
        name: "BadMcp",
        defaultMcpConfigs: [{ name: "fs", command: "x" } as never],
      }),
    ).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(
      h.owner.agent.create({ ...base, name: "BadSkill", defaultSkills: ["git" as never] }),
    ).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(
      h.owner.agent.create({
        ...base,
        name: "Escape",
        defaultSkills: [
          {
            kind: "inline",
            name: "x",
            description: "y",
            instructions: "z",
            files: [{ path: "../out", content: "" }],
          },
        ],
      }),
    ).rejects.toMatchObject({ code: "BAD_REQUEST" });
  });
});
