import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runTurn } from "@/server/agent/agent-loop";
import { createAgentModel } from "@/server/agent/model-provider";
import { assembleToolkit } from "@/server/agent/toolkit";
import { turnWorkspacePort } from "@/server/agent/workspace-adapters";
import { attachThrough } from "@/server/workspace/drivers/driver";
import { createHostFolderDriver } from "@/server/workspace/manager/local-workspace-manager";
import { IsolationPolicy } from "@/server/workspace/manager/isolation";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import { FileReadState } from "@/server/workspace/tools";
import { Workspace } from "@/server/workspace/workspace";
import { startFakeModel, type FakeModelServer } from "@/test/fixtures/fake-model/server";

/**
 * A full turn on the engine's real Workspace: toolkit from the workspace (builtin tools, a real stdio MCP
 * server from npm, a skill in the agent's partition, the workspace instructions), tools executed for real,
 * offload through the workspace. Only the model is scripted.
 */
const EVERYTHING_ENTRY = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");

let fake: FakeModelServer;
let basedir: string;
let workspace: Workspace;

beforeEach(async () => {
  fake = await startFakeModel({ apiKey: "sk-ws" });
  basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-chat-ws-")));
  workspace = new Workspace({
    spec: {
      workspaceId: "ws1",
      tenantId: "t1",
      userId: "u1",
      agentId: "agent1",
      isolation: IsolationPolicy.PER_AGENT,
    },
    attacher: attachThrough(createHostFolderDriver({ basedir: path.join(basedir, "workspaces") })),
  });
  await workspace.initialize();
});

afterEach(async () => {
  await workspace.close();
  await fake.close();
  await fs.rm(basedir, { recursive: true, force: true });
});

describe("a chat turn on a real Workspace", () => {
  it("uses the workspace's skills, MCP tools and builtin tools, and offloads through it", async () => {
    const skillSource = path.join(basedir, "skill-src", "greeting");
    await fs.mkdir(skillSource, { recursive: true });
    await fs.writeFile(
      path.join(skillSource, "SKILL.md"),
      "---\nname: greeting\ndescription: How to greet people politely\n---\nAlways say GREETINGS-FROM-SKILL.\n",
    );
    await workspace.addSkill(skillSource, "agent1");
    await workspace.addMcp(
      ZMcpDeclaration.parse({
        name: "everything",
        is_stateful: true,
        mcp_config: { type: "stdio_mcp", command: process.execPath, args: [EVERYTHING_ENTRY, "stdio"] },
      }),
      { agentId: "agent1", sessionId: "sess1" },
    );

    const port = turnWorkspacePort(workspace, { readState: new FileReadState() });
    const toolkit = await assembleToolkit({
      agentId: "agent1",
      sessionId: "sess1",
      baseSystemPrompt: "You are Ada.",
      workspace: port,
    });
    const file = path.join(workspace.workdir, "out", "greeting.txt");
    fake.enqueue(
      { kind: "tool-calls", calls: [{ id: "c_skill", name: "Skill", arguments: { name: "greeting" } }] },
      {
        kind: "tool-calls",
        calls: [{ id: "c_mcp", name: "mcp__everything__echo", arguments: { message: "hello mcp" } }],
      },
      {
        kind: "tool-calls",
        calls: [{ id: "c_write", name: "Write", arguments: { file_path: file, content: "GREETINGS\n" } }],
      },
      { kind: "tool-calls", calls: [{ id: "c_big", name: "Bash", arguments: { command: "seq 1 5000" } }] },
      { kind: "text", text: "Done." },
    );
    const agentModel = createAgentModel({ baseUrl: fake.baseUrl, apiKey: "sk-ws", model: "fake" });
    const result = await runTurn({
      sessionId: "sess1",
      model: agentModel.model,
      system: toolkit.system,
      history: [],
      userMessage: "greet",
      tools: toolkit.tools,
      offloader: port,
      limits: { maxRetries: 0 },
    });

    expect(result.status).toBe("completed");
    const [first] = fake.requests;
    const system = String(first!.messages[0]!.content);
    expect(system.startsWith("You are Ada.")).toBe(true);
    expect(system).toContain("- greeting: How to greet people politely");
    expect(system).toContain(workspace.workdir); // the workspace instructions name the workdir
    const toolNames = first!.tools.map((tool) => tool.function.name);
    expect(toolNames).toEqual(
      expect.arrayContaining(["Bash", "Read", "Write", "Skill", "mcp__everything__echo"]),
    );

    const toolReply = (index: number) => String(fake.requests[index]!.messages.at(-1)!.content);
    expect(toolReply(1)).toContain("Always say GREETINGS-FROM-SKILL.");
    expect(toolReply(2)).toContain("hello mcp");
    expect(toolReply(3)).toContain("has been written successfully");
    expect(await fs.readFile(file, "utf8")).toBe("GREETINGS\n");
    expect(toolReply(4)).toContain("'workspace:///sessions/sess1/tool_result-c_big.txt'");
    const offloaded = await fs.readFile(
      path.join(workspace.workdir, "sessions", "sess1", "tool_result-c_big.txt"),
      "utf8",
    );
    expect(offloaded.trim().split("\n")).toHaveLength(5000);
  });
});
