import { describe, expect, it } from "vitest";
import type { AgentTool, TurnWorkspacePort } from "@/server/agent/ports";
import { assembleToolkit, mcpContentText, providerSafeToolName } from "@/server/agent/toolkit";
import { AppError } from "@/server/shared/errors";
import type { McpToolDescriptor, McpToolResult } from "@/server/workspace/mcp/types";
import { testTool } from "./support";

function fakeMcpTool(
  mcpName: string,
  toolName: string,
  call: (args: Record<string, unknown>, signal?: AbortSignal) => McpToolResult = () => ({
    content: [{ type: "text", text: "ok" }],
    isError: false,
  }),
): McpToolDescriptor & { calls: Array<{ args: Record<string, unknown>; signal?: AbortSignal }> } {
  const calls: Array<{ args: Record<string, unknown>; signal?: AbortSignal }> = [];
  return {
    name: `mcp__${mcpName}__${toolName}`,
    mcpName,
    toolName,
    description: `${toolName} of ${mcpName}`,
    inputSchema: { type: "object", properties: { q: { type: "string" } } },
    calls,
    call: (args, options) => {
      calls.push({ args, ...(options?.signal ? { signal: options.signal } : {}) });
      return Promise.resolve(call(args, options?.signal));
    },
  };
}

function workspace(overrides: Partial<TurnWorkspacePort> = {}): TurnWorkspacePort & { skillReads: string[] } {
  const skillReads: string[] = [];
  return {
    skillReads,
    listTools: () => [testTool("Read", () => Promise.resolve({ content: "r", isError: false }))],
    listMcpTools: () => Promise.resolve([]),
    listSkills: () => Promise.resolve([]),
    readSkill: (agentId, name) => {
      skillReads.push(`${agentId}/${name}`);
      return Promise.resolve(`# ${name}\nDo the thing.`);
    },
    getInstructions: () => "<workspace>You have access to a local workspace.</workspace>",
    offloadToolResult: () => Promise.resolve("workspace:///x"),
    offloadContext: () => Promise.resolve("workspace:///y"),
    ...overrides,
  };
}

const base = { agentId: "a1", sessionId: "s1", baseSystemPrompt: "You are Ada." };

describe("assembleToolkit", () => {
  it("builds the system prompt: base prompt, skills, then the workspace instructions", async () => {
    const toolkit = await assembleToolkit({
      ...base,
      workspace: workspace({
        listSkills: () =>
          Promise.resolve([
            { name: "pdf", description: "Work with PDF files" },
            { name: "xlsx", description: "Spreadsheets" },
          ]),
      }),
    });
    const [prompt, skills, instructions] = [
      toolkit.system.indexOf("You are Ada."),
      toolkit.system.indexOf("<skills>"),
      toolkit.system.indexOf("<workspace>"),
    ];
    expect(prompt).toBe(0);
    expect(skills).toBeGreaterThan(prompt);
    expect(instructions).toBeGreaterThan(skills);
    expect(toolkit.system).toContain("- pdf: Work with PDF files");
    expect(toolkit.tools.map((tool) => tool.name)).toEqual(["Read", "Skill"]);
  });

  it("the Skill tool reads one skill of the agent's partition on demand", async () => {
    const ws = workspace({ listSkills: () => Promise.resolve([{ name: "pdf", description: "PDFs" }]) });
    const toolkit = await assembleToolkit({ ...base, workspace: ws });
    const skill = toolkit.tools.find((tool) => tool.name === "Skill")!;
    expect(skill.inputSchema).toMatchObject({ properties: { name: { enum: ["pdf"] } } });
    expect(await skill.execute({ name: "pdf" }, {})).toEqual({
      content: "# pdf\nDo the thing.",
      isError: false,
    });
    expect(ws.skillReads).toEqual(["a1/pdf"]);
    expect((await skill.execute({ name: "nope" }, {})).isError).toBe(true);
  });

  it("offers no Skill tool and no skills section without skills", async () => {
    const toolkit = await assembleToolkit({ ...base, workspace: workspace() });
    expect(toolkit.tools.map((tool) => tool.name)).toEqual(["Read"]);
    expect(toolkit.system).not.toContain("<skills>");
  });

  it("exposes the scope's MCP tools under provider-safe names and calls them with the turn's signal", async () => {
    const search = fakeMcpTool("github", "search");
    const dotted = fakeMcpTool("fs", "read.file");
    let scopeAsked: unknown;
    const toolkit = await assembleToolkit({
      ...base,
      workspace: workspace({
        listMcpTools: (scope) => {
          scopeAsked = scope;
          return Promise.resolve([search, dotted]);
        },
      }),
    });

    expect(scopeAsked).toEqual({ agentId: "a1", sessionId: "s1" });
    const names = toolkit.tools.map((tool) => tool.name);
    expect(names[0]).toBe("Read");
    expect(names[1]).toBe("mcp__github__search");
    expect(names[2]).toMatch(/^mcp__fs__read_file_[0-9a-f]{8}$/);

    const controller = new AbortController();
    expect(await toolkit.tools[1]!.execute({ q: "berth" }, { signal: controller.signal })).toEqual({
      content: "ok",
      isError: false,
    });
    expect(search.calls).toEqual([{ args: { q: "berth" }, signal: controller.signal }]);
  });

  it("appends extra tools (team tools) and keeps the first of duplicate names", async () => {
    const extra: AgentTool[] = [
      testTool("AgentCreate", () => Promise.resolve({ content: "", isError: false })),
      testTool("Read", () => Promise.resolve({ content: "shadow", isError: false })),
    ];
    const toolkit = await assembleToolkit({ ...base, workspace: workspace(), extraTools: extra });
    expect(toolkit.tools.map((tool) => tool.name)).toEqual(["Read", "AgentCreate"]);
    expect(await toolkit.tools[0]!.execute({}, {})).toEqual({ content: "r", isError: false });
  });

  it("fails when the workspace cannot list its tools", async () => {
    await expect(
      assembleToolkit({
        ...base,
        workspace: workspace({
          listTools: () => Promise.reject(new AppError("UNAVAILABLE", "not provisioned")),
        }),
      }),
    ).rejects.toMatchObject({ code: "UNAVAILABLE" });
  });
});

describe("MCP helpers", () => {
  it("keeps tool names provider-safe", () => {
    expect(providerSafeToolName("mcp__github__search")).toBe("mcp__github__search");
    expect(providerSafeToolName("mcp__fs__read.file")).toMatch(/^mcp__fs__read_file_[0-9a-f]{8}$/);
    const long = providerSafeToolName(`mcp__server__${"x".repeat(100)}`);
    expect(long).toHaveLength(64);
    expect(long).toMatch(/^[a-zA-Z0-9_-]+$/);
    expect(providerSafeToolName(`mcp__server__${"x".repeat(101)}`)).not.toBe(long);
  });

  it("renders MCP content blocks as text", () => {
    expect(
      mcpContentText({
        isError: false,
        content: [
          { type: "text", text: "line one" },
          { type: "image", data: "AAAA", mimeType: "image/png" },
          { type: "resource", resource: { uri: "file:///a.txt", text: "inline resource" } },
        ],
      }),
    ).toBe("line one\n[image: image/png]\ninline resource");
    expect(mcpContentText({ isError: false, content: [], structuredContent: { n: 1 } })).toBe('{"n":1}');
  });
});
