import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { assembleToolkit, SKILL_TOOL_NAME } from "@/server/agent/toolkit";
import { turnWorkspacePort } from "@/server/agent/workspace-adapters";
import { attachThrough } from "@/server/workspace/drivers/driver";
import { createHostFolderDriver } from "@/server/workspace/manager/local-workspace-manager";
import { IsolationPolicy } from "@/server/workspace/manager/isolation";
import { Workspace } from "@/server/workspace/workspace";

/** What the agent sees of its skills, from a real workspace: two skills that declare the same name. */
let basedir: string;
let workspace: Workspace;

beforeEach(async () => {
  basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-toolkit-skills-")));
  workspace = new Workspace({
    spec: {
      workspaceId: "ws1",
      tenantId: "t1",
      userId: "u1",
      agentId: "a1",
      isolation: IsolationPolicy.PER_AGENT,
    },
    attacher: attachThrough(createHostFolderDriver({ basedir: path.join(basedir, "ws") })),
  });
  await workspace.initialize();
});
afterEach(async () => {
  await workspace.close();
  await fs.rm(basedir, { recursive: true, force: true });
});

async function install(folder: string, description: string) {
  const dir = path.join(basedir, "src", folder);
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(
    path.join(dir, "SKILL.md"),
    `---\nname: helper\ndescription: ${description}\n---\n${description} body\n`,
  );
  await workspace.addSkill(dir, "a1");
}

describe("skills with the same front-matter name, as the agent sees them", () => {
  it("are listed as `helper` and `helper (1)` in the prompt and the Skill tool, and each reads its own SKILL.md", async () => {
    await install("first", "Does the first thing");
    await install("second", "Does the second thing");
    const toolkit = await assembleToolkit({
      agentId: "a1",
      sessionId: "s1",
      baseSystemPrompt: "You are a test agent.",
      workspace: turnWorkspacePort(workspace),
    });
    expect(toolkit.system).toContain("- helper: Does the first thing");
    expect(toolkit.system).toContain("- helper (1): Does the second thing");
    const skillTool = toolkit.tools.find((tool) => tool.name === SKILL_TOOL_NAME)!;
    const properties = skillTool.inputSchema.properties as { name: { enum: string[] } };
    expect(properties.name.enum).toEqual(["helper", "helper (1)"]);
    expect((await skillTool.execute({ name: "helper (1)" }, {})).content).toContain(
      "Does the second thing body",
    );
    expect((await skillTool.execute({ name: "helper" }, {})).content).toContain("Does the first thing body");
  });
});
