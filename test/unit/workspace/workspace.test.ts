import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createHostFolderDriver } from "@/server/workspace/manager/local-workspace-manager";
import { DEFAULT_WORKSPACE_INSTRUCTIONS } from "@/server/workspace/instructions";
import { IsolationPolicy } from "@/server/workspace/manager/isolation";
import { attachThrough, type WorkspaceDriver, type WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { Workspace, type WorkspaceOptions } from "@/server/workspace/workspace";
import { streamToString } from "./helpers";
import { everythingMcp } from "./support/mcp-servers";

let basedir: string;
let driver: WorkspaceDriver;
const spec: WorkspaceSpec = {
  workspaceId: "ws1",
  tenantId: "t1",
  userId: "u1",
  agentId: "a1",
  isolation: IsolationPolicy.PER_AGENT,
};
const open: Workspace[] = [];

beforeEach(async () => {
  basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-wsp-")));
  driver = createHostFolderDriver({ basedir });
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((workspace) => workspace.close()));
  await fs.rm(basedir, { recursive: true, force: true });
});

function make(options: Partial<WorkspaceOptions> = {}): Workspace {
  const workspace = new Workspace({ spec, attacher: attachThrough(driver), ...options });
  open.push(workspace);
  return workspace;
}

describe("Workspace lifecycle", () => {
  it("initialises once under concurrency and lays out the folders under tenant/user/id", async () => {
    const workspace = make();
    await Promise.all(Array.from({ length: 20 }, () => workspace.initialize()));
    expect(workspace.workdir).toBe(path.join(basedir, "t1", "u1", "ws1"));
    const entries = (await fs.readdir(workspace.workdir)).sort();
    expect(entries).toEqual(["data", "sessions", "skills"]);
    expect(await fs.readdir(path.join(workspace.workdir, "skills"))).toEqual([".seed"]);
    expect(await workspace.isAlive()).toBe(true);
    expect(workspace.isPersistent()).toBe(true);
    expect(workspace.isolated).toBe(false);
  });

  it("refuses use before initialise and after close; close is idempotent and keeps files", async () => {
    const workspace = make();
    expect(() => workspace.machine).toThrow(expect.objectContaining({ code: "UNAVAILABLE" }));
    await workspace.initialize();
    const workdir = workspace.workdir;
    await fs.writeFile(path.join(workdir, "keep.txt"), "k");
    await workspace.close();
    await workspace.close();
    expect(await workspace.isAlive()).toBe(false);
    await expect(workspace.offloadContext("s", [{}])).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(await fs.readFile(path.join(workdir, "keep.txt"), "utf8")).toBe("k");
  });

  it("supports await using", async () => {
    let captured: Workspace;
    {
      await using workspace = new Workspace({ spec, attacher: attachThrough(driver) });
      captured = workspace;
      await workspace.initialize();
      expect(await workspace.isAlive()).toBe(true);
    }
    expect(await captured.isAlive()).toBe(false);
  });

  it("detaches the machine when initialise fails after attaching", async () => {
    const detached: string[] = [];
    const failing: WorkspaceDriver = {
      ...driver,
      attach: async (s) => {
        const machine = await driver.attach(s);
        machine.mkdir = () => Promise.reject(new Error("disk full"));
        return machine;
      },
      detach: async (machine) => {
        detached.push(machine.workdir);
        await driver.detach(machine);
      },
    };
    const workspace = make({
      attacher: attachThrough(failing),
      instructionsTemplate: "{workdir}",
      skillPaths: [],
    });
    await expect(workspace.initialize()).rejects.toThrow("disk full");
    expect(detached).toEqual([path.join(basedir, "t1", "u1", "ws1")]);
    expect(workspace.isInitialized).toBe(false);
  });

  it("reset wipes managed state but keeps project files", async () => {
    const workspace = make();
    await workspace.initialize();
    await workspace.offloadContext("s1", [{ a: 1 }]);
    await fs.writeFile(path.join(workspace.workdir, "project.txt"), "p");
    await fs.writeFile(path.join(workspace.workdir, ".mcp"), "{}");
    await workspace.reset();
    expect((await fs.readdir(workspace.workdir)).sort()).toEqual([
      "data",
      "project.txt",
      "sessions",
      "skills",
    ]);
    expect(await fs.readdir(path.join(workspace.workdir, "sessions"))).toEqual([]);
  });
});

describe("Workspace instructions and tools", () => {
  it("renders the reference template with a closed code fence", async () => {
    const workspace = make();
    await workspace.initialize();
    const text = workspace.getInstructions();
    expect(
      text.startsWith(`<workspace>You have access to a local workspace at ${workspace.workdir} with`),
    ).toBe(true);
    expect(text.endsWith("</workspace>")).toBe(true);
    expect(text.match(/```/g)?.length ?? 0).toBe(4); // two fences, both closed
    expect(text).not.toMatch(/\{(backend|workdir)\}/);
    expect(DEFAULT_WORKSPACE_INSTRUCTIONS).toContain("uv venv && uv pip install ...\n```\n");
  });

  it("accepts custom templates with only {backend}/{workdir} and literal {{ }}", async () => {
    expect(() => make({ instructionsTemplate: "{nope}" })).toThrow(
      expect.objectContaining({ code: "BAD_REQUEST" }),
    );
    const workspace = make({ instructionsTemplate: "{backend} at {workdir} {{x}}" });
    await workspace.initialize();
    expect(workspace.getInstructions()).toBe(`local at ${workspace.workdir} {x}`);
  });

  it("lists the six tools bound to its backend", async () => {
    const workspace = make();
    await workspace.initialize();
    const tools = workspace.listTools({ readState: null });
    expect(tools.map((tool) => tool.name)).toEqual(["Bash", "Edit", "Glob", "Grep", "Read", "Write"]);
    const write = tools.find((tool) => tool.name === "Write")!;
    await write.execute({ file_path: `${workspace.workdir}/x.txt`, content: "hi" });
    expect(await fs.readFile(path.join(workspace.workdir, "x.txt"), "utf8")).toBe("hi");
  });
});

describe("Workspace offload and purge", () => {
  it("offloads and resolves references", async () => {
    const workspace = make();
    await workspace.initialize();
    const ref = await workspace.offloadToolResult("s1", "call_1", "big output");
    expect(await streamToString(await workspace.resolveReference(ref))).toBe("big output");
  });

  it("purgeSession deletes exactly that session's files and MCP scopes; purgeAgent the agent's skills and scopes", async () => {
    const workspace = make({ defaultMcps: [] });
    await workspace.initialize();
    await workspace.offloadContext("s1", [{ a: 1 }]);
    await workspace.offloadContext("s2", [{ b: 2 }]);
    const mcp = everythingMcp("ev");
    await workspace.addMcp(mcp, { agentId: "a1", sessionId: "s1" });
    await workspace.addMcp(mcp, { agentId: "a2", sessionId: "s1" });
    await workspace.addMcp(mcp, { agentId: "a1", sessionId: "s2" });
    await workspace.purgeSession({ sessionId: "s1" });
    expect(await fs.readdir(path.join(workspace.workdir, "sessions"))).toEqual(["s2"]);
    expect(workspace.getMcpDeclarations({ agentId: "a1", sessionId: "s1" })).toEqual([]);
    expect(workspace.getMcpDeclarations({ agentId: "a2", sessionId: "s1" })).toEqual([]);
    expect(workspace.getMcpDeclarations({ agentId: "a1", sessionId: "s2" }).map((d) => d.name)).toEqual([
      "ev",
    ]);

    await workspace.listSkills("a1");
    await workspace.listSkills("a2");
    await workspace.purgeAgent({ agentId: "a1" });
    expect((await fs.readdir(path.join(workspace.workdir, "skills"))).sort()).toEqual([".seed", "a2"]);
    expect(workspace.getMcpDeclarations({ agentId: "a1", sessionId: "s2" })).toEqual([]);
    const persisted = JSON.parse(await fs.readFile(path.join(workspace.workdir, ".mcp"), "utf8")) as {
      version: number;
      mcps: Record<string, unknown>;
    };
    expect(persisted.version).toBe(2);
    expect(Object.keys(persisted.mcps)).toEqual([]);
  });

  it("persists MCP declarations in .mcp across close and re-initialise", async () => {
    const first = make();
    await first.initialize();
    const client = await first.addMcp(everythingMcp("ev"), { agentId: "a", sessionId: "s" });
    expect(client.isConnected).toBe(true);
    await first.close();
    expect(client.isConnected).toBe(false);
    const second = make();
    await second.initialize();
    expect(second.getMcpDeclarations({ agentId: "a", sessionId: "s" }).map((d) => d.name)).toEqual(["ev"]);
    const [live] = await second.listMcps({ agentId: "a", sessionId: "s" });
    expect((await live!.listTools()).map((tool) => tool.name)).toContain("echo");
  });
});
