import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as uploadLibrarySkill } from "@/app/api/library/skills/route";
import { createCaller } from "@/server/api/root";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import { getQueues } from "@/server/queue/queues";
import { getRedis } from "@/server/redis";
import { contextFromHeaders } from "../api/support/api-test-runtime";
import { rejectionCode } from "../api/support/call-by-path";
import { startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { tarOf, zipOf } from "../../unit/workspace/support/archives";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

/**
 * The tenant library through the API as one process runs it (routers, services, real Postgres, Redis,
 * in-process workers, local workspaces, the real `server-everything` MCP from npm): entries are added,
 * read, changed and deleted under their role gates, skills arrive through the upload route in both body
 * formats and are refused when an inline skill cannot hold them, "equip" copies an entry into an agent's
 * defaults (and the agent's workspaces then start with it), "used by" tells identical copies from edited
 * ones, and an entry installs into a workspace's MCP scope or skill partition in one call.
 */
const EVERYTHING_ENTRY = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const HELLO_SKILL = path.resolve("test/fixtures/skills/hello-skill");

let h: AgentApiHarness;
let admin: ReturnType<typeof createCaller>;
let member: ReturnType<typeof createCaller>;
let adminKey: string;

const everything = (name: string) => ({
  name,
  is_stateful: true,
  mcp_config: { type: "stdio_mcp" as const, command: process.execPath, args: [EVERYTHING_ENTRY, "stdio"] },
});

async function postSkill(body: BodyInit, headers: Record<string, string>, query = "") {
  const url = `http://localhost:3000/api/library/skills?tenantId=${h.tenant.tenant.id}${query}`;
  const response = await uploadLibrarySkill(
    new Request(url, { method: "POST", headers: { authorization: `Bearer ${adminKey}`, ...headers }, body }),
  );
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** The dashboard's folder upload: a manifest of paths and sizes, then the files in that order. */
async function folderUpload(dir: string) {
  const files: { path: string; content: Buffer }[] = [];
  const walk = async (at: string, prefix: string) => {
    for (const name of (await fs.readdir(at)).sort()) {
      const full = path.join(at, name);
      if ((await fs.stat(full)).isDirectory()) await walk(full, `${prefix}/${name}`);
      else files.push({ path: `${prefix}/${name}`, content: await fs.readFile(full) });
    }
  };
  await walk(dir, path.basename(dir));
  const form = new FormData();
  form.append(
    "manifest",
    JSON.stringify({ entries: files.map((f) => ({ path: f.path, size: f.content.length })) }),
  );
  for (const file of files) form.append("files", new Blob([new Uint8Array(file.content)]), file.path);
  return form;
}

beforeAll(async () => {
  h = await startAgentApiHarness("library");
  const key = (role: "admin" | "member") =>
    createApiKey(
      h.runtime.auth,
      h.tenant.ownerScope,
      { name: `library ${role}`, role },
      apiKeySecret(processBerth().config),
      processBerth().db,
    );
  adminKey = h.tenant.adminKey.plainKey;
  admin = createCaller(contextFromHeaders(h.runtime, { authorization: `Bearer ${adminKey}` }));
  member = createCaller(
    contextFromHeaders(h.runtime, { authorization: `Bearer ${(await key("member")).plainKey}` }),
  );
});

afterAll(async () => {
  await h.close();
  await closeProcessBerth();
});

describe("library entries", () => {
  it("admins add, change and delete MCP entries; members and viewers read them; writes are audited", async () => {
    const entry = await admin.library.create({
      ...h.ref,
      kind: "MCP",
      description: "The reference server",
      declaration: everything("everything"),
    });
    // Stored as the engine parses it (defaults filled in), which is what agents' defaults hold.
    expect(entry).toMatchObject({ kind: "MCP", name: "everything", usedBy: [], skill: null });
    expect(entry.declaration).toMatchObject({ mcp_config: { env: null, cwd: null }, enable_tools: null });

    for (const reader of [member, h.viewer]) {
      const page = await reader.library.list({ ...h.ref, kind: "MCP" });
      expect(page.items.map((item) => item.id)).toContain(entry.id);
      expect((await reader.library.get({ ...h.ref, entryId: entry.id })).description).toBe(
        "The reference server",
      );
    }
    const probe = { ...h.ref, kind: "MCP" as const, declaration: everything("probe") };
    expect(await rejectionCode(member.library.create(probe))).toBe("FORBIDDEN");
    expect(await rejectionCode(h.viewer.library.create(probe))).toBe("FORBIDDEN");
    expect(await rejectionCode(member.library.delete({ ...h.ref, entryId: entry.id }))).toBe("FORBIDDEN");

    // A second entry of the same name is a conflict; a bad declaration is refused by the engine's schema.
    expect(
      await rejectionCode(admin.library.create({ ...probe, declaration: everything("everything") })),
    ).toBe("CONFLICT");
    const invalid = { ...probe, declaration: { ...everything("bad name!"), is_stateful: false } };
    expect(await rejectionCode(admin.library.create(invalid))).toBe("BAD_REQUEST");

    const renamed = await admin.library.update({
      ...h.ref,
      entryId: entry.id,
      patch: { description: "Vetted", declaration: everything("everything2") },
    });
    expect(renamed).toMatchObject({ name: "everything2", description: "Vetted" });
    // An MCP entry cannot turn into a skill.
    const skill = { kind: "inline" as const, name: "x", description: "y", instructions: "z", files: [] };
    expect(await rejectionCode(admin.library.update({ ...h.ref, entryId: entry.id, patch: { skill } }))).toBe(
      "BAD_REQUEST",
    );
    await admin.library.delete({ ...h.ref, entryId: entry.id });
    expect(await rejectionCode(admin.library.get({ ...h.ref, entryId: entry.id }))).toBe("NOT_FOUND");

    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getQueues().redisPrefix,
    });
    const audit = await h.owner.audit.list({ ...h.ref, limit: 200 });
    const actions = audit.items.filter((row) => row.targetId === entry.id).map((row) => row.action);
    expect(actions).toEqual(expect.arrayContaining(["library.create", "library.update", "library.delete"]));
  });

  it("takes a skill as a folder upload or an archive, stored inline, and refuses what an inline skill cannot hold", async () => {
    const folder = await postSkill(await folderUpload(HELLO_SKILL), {}, "&description=Greets%20people");
    expect(folder.status).toBe(201);
    expect(folder.body).toMatchObject({ kind: "SKILL", name: "hello", description: "Greets people" });
    const detail = await admin.library.get({ ...h.ref, entryId: folder.body.id as string });
    expect(detail.skillContent).toMatchObject({
      name: "hello",
      description: "Says hello to the user",
      files: [
        { path: "scripts/hello.sh", content: await fs.readFile(`${HELLO_SKILL}/scripts/hello.sh`, "utf8") },
      ],
    });
    expect(detail.skillContent?.instructions).toContain("Run `scripts/hello.sh`.");
    // Again: the library holds one skill per name.
    expect((await postSkill(await folderUpload(HELLO_SKILL), {})).status).toBe(409);

    const md = "---\nname: zipped\ndescription: From a zip\n---\nBody\n";
    const zip = await zipOf([
      { name: "outer/zipped/SKILL.md", content: md },
      { name: "outer/zipped/a.txt", content: "A" },
    ]);
    const zipped = await postSkill(new Uint8Array(zip), { "content-type": "application/zip" });
    expect(zipped.status).toBe(201);
    expect(
      (await admin.library.get({ ...h.ref, entryId: zipped.body.id as string })).skillContent,
    ).toMatchObject({
      name: "zipped",
      instructions: "Body",
      files: [{ path: "a.txt", content: "A" }],
    });

    const refusals: [string, Buffer][] = [
      [
        "binary",
        await tarOf([
          { name: "b/SKILL.md", content: md.replace("zipped", "b") },
          { name: "b/x.bin", content: Buffer.from([0xff, 0xfe, 0]) },
        ]),
      ],
      [
        "link",
        await tarOf([
          { name: "l/SKILL.md", content: md.replace("zipped", "l") },
          { name: "l/ln", type: "symlink", linkname: "SKILL.md" },
        ]),
      ],
      ["escape", await tarOf([{ name: "../evil/SKILL.md", content: md }])],
      ["no skill", await tarOf([{ name: "n/README.md", content: "hi" }])],
    ];
    for (const [label, tar] of refusals) {
      const refused = await postSkill(new Uint8Array(tar), { "content-type": "application/x-tar" });
      expect(refused.status, label).toBe(400);
    }
    expect((await postSkill(new Uint8Array(zip), { "content-type": "text/plain" })).status).toBe(422);

    // Members may not upload into the library.
    const memberKey = (
      await createApiKey(
        h.runtime.auth,
        h.tenant.ownerScope,
        { name: "m", role: "member" },
        apiKeySecret(processBerth().config),
        processBerth().db,
      )
    ).plainKey;
    const response = await uploadLibrarySkill(
      new Request(`http://localhost:3000/api/library/skills?tenantId=${h.tenant.tenant.id}`, {
        method: "POST",
        headers: { authorization: `Bearer ${memberKey}`, "content-type": "application/zip" },
        body: new Uint8Array(zip),
      }),
    );
    expect(response.status).toBe(403);
  });

  it("refuses a front-matter name or description Postgres cannot store or over the bound with a 400 naming it", async () => {
    const skillMd = (name: string, description = "Does things") =>
      `---\nname: ${name}\ndescription: ${description}\n---\nBody\n`;
    const cases: [string, string, RegExp][] = [
      ["nul-name", skillMd('"bad\\0name"'), /^name: .*NUL/],
      ["surrogate-name", skillMd('"bad\\udc00name"'), /^name: .*surrogate/],
      ["long-name", skillMd("n".repeat(5_000)), /^name: must be at most 100 characters/],
      ["nul-description", skillMd("nul-description", '"says\\0things"'), /^description: .*NUL/],
      [
        "long-description",
        skillMd("long-description", "d".repeat(1_025)),
        /^description: must be at most 1024/,
      ],
    ];
    const before = (await admin.library.list(h.ref)).items.length;
    for (const [folder, content, message] of cases) {
      const tar = await tarOf([{ name: `${folder}/SKILL.md`, content }]);
      const refused = await postSkill(new Uint8Array(tar), { "content-type": "application/x-tar" });
      expect(refused.status, folder).toBe(400);
      expect((refused.body.error as { message: string }).message, folder).toMatch(message);
    }
    expect((await admin.library.list(h.ref)).items).toHaveLength(before);
    // A description of 1,024 characters (Anthropic's SKILL.md bound) is taken.
    const longest = await tarOf([
      { name: "longest/SKILL.md", content: skillMd("longest", "d".repeat(1_024)) },
    ]);
    expect((await postSkill(new Uint8Array(longest), { "content-type": "application/x-tar" })).status).toBe(
      201,
    );
  });
});

describe("equip and install", () => {
  it("equips an agent's defaults from entries, says who uses each, and the agent's workspace starts with them", async () => {
    const mcp = await admin.library.create({ ...h.ref, kind: "MCP", declaration: everything("tools") });
    const skill = await admin.library.create({
      ...h.ref,
      kind: "SKILL",
      skill: { kind: "inline", name: "notes", description: "Takes notes", instructions: "Write NOTES.md." },
    });
    const agent = await admin.agent.create({ ...h.ref, name: "Equipped", modelConfig: { model: "m" } });
    const other = await admin.agent.create({ ...h.ref, name: "Other", modelConfig: { model: "m" } });

    expect(await rejectionCode(member.library.equip({ ...h.ref, entryId: mcp.id, agentId: agent.id }))).toBe(
      "FORBIDDEN",
    );
    for (const entry of [mcp, skill])
      expect(await admin.library.equip({ ...h.ref, entryId: entry.id, agentId: agent.id })).toMatchObject({
        outcome: "added",
      });
    expect((await admin.library.equip({ ...h.ref, entryId: mcp.id, agentId: agent.id })).outcome).toBe(
      "unchanged",
    );
    await admin.library.equip({ ...h.ref, entryId: mcp.id, agentId: other.id });
    const stored = await admin.agent.get({ ...h.ref, agentId: agent.id });
    expect(stored.defaultMcpConfigs).toEqual([mcp.declaration]);
    expect(stored.defaultSkills).toMatchObject([{ name: "notes", files: [] }]);

    const usedBy = async (entryId: string) => (await h.viewer.library.get({ ...h.ref, entryId })).usedBy;
    expect(await usedBy(mcp.id)).toEqual([
      { agentId: agent.id, agentName: "Equipped", identical: true },
      { agentId: other.id, agentName: "Other", identical: true },
    ]);
    // Edited on the agent: still named there, no longer the library's version; equipping again restores it.
    await admin.agent.update({
      ...h.ref,
      agentId: other.id,
      patch: { defaultMcpConfigs: [{ ...everything("tools"), execution_timeout: 5 }] },
    });
    expect((await usedBy(mcp.id)).find((use) => use.agentId === other.id)?.identical).toBe(false);
    expect((await admin.library.equip({ ...h.ref, entryId: mcp.id, agentId: other.id })).outcome).toBe(
      "replaced",
    );
    expect((await usedBy(mcp.id)).every((use) => use.identical)).toBe(true);
    expect(
      (await h.viewer.library.list({ ...h.ref, kind: "SKILL" })).items.find((e) => e.id === skill.id)?.usedBy,
    ).toEqual([{ agentId: agent.id, agentName: "Equipped", identical: true }]);

    // The defaults reach the agent's workspace on its next use.
    const session = await admin.session.create({ ...h.ref, agentId: agent.id });
    const target = { ...h.ref, workspaceId: session.workspaceId, agentId: agent.id };
    const skills = await admin.workspace.skill.list(target);
    expect(skills.map((s) => s.name)).toContain("notes");
    const mcps = await admin.workspace.mcp.list({ ...target, sessionId: session.sessionId });
    expect(mcps).toMatchObject([{ name: "tools", state: "running" }]);
  });

  it("installs an MCP entry into a workspace scope and a skill entry into a partition in one call each", async () => {
    const mcp = await admin.library.create({ ...h.ref, kind: "MCP", declaration: everything("installed") });
    const skill = await admin.library.create({
      ...h.ref,
      kind: "SKILL",
      skill: {
        kind: "inline",
        name: "checklist",
        description: "A checklist",
        instructions: "Follow it.",
        files: [{ path: "docs/list.md", content: "- one\n" }],
      },
    });
    const agent = await admin.agent.create({ ...h.ref, name: "Installer", modelConfig: { model: "m" } });
    const session = await admin.session.create({ ...h.ref, agentId: agent.id });
    const scope = {
      ...h.ref,
      workspaceId: session.workspaceId,
      agentId: agent.id,
      sessionId: session.sessionId,
    };

    expect(await rejectionCode(h.viewer.workspace.mcp.addFromLibrary({ ...scope, entryId: mcp.id }))).toBe(
      "FORBIDDEN",
    );
    expect(await admin.workspace.mcp.addFromLibrary({ ...scope, entryId: mcp.id })).toEqual({
      name: "installed",
    });
    expect(await rejectionCode(admin.workspace.mcp.addFromLibrary({ ...scope, entryId: mcp.id }))).toBe(
      "CONFLICT",
    );
    const listed = await admin.workspace.mcp.list(scope);
    expect(listed).toMatchObject([{ name: "installed", state: "running" }]);
    // A skill entry is not an MCP (and the reverse).
    expect(await rejectionCode(admin.workspace.mcp.addFromLibrary({ ...scope, entryId: skill.id }))).toBe(
      "BAD_REQUEST",
    );
    expect(await rejectionCode(admin.workspace.skill.addFromLibrary({ ...scope, entryId: mcp.id }))).toBe(
      "BAD_REQUEST",
    );

    const installed = await admin.workspace.skill.addFromLibrary({ ...scope, entryId: skill.id });
    expect(installed).toMatchObject({ name: "checklist", deduplicated: false });
    const skills = await admin.workspace.skill.list({
      ...h.ref,
      workspaceId: session.workspaceId,
      agentId: agent.id,
    });
    expect(skills.map((s) => s.name)).toContain("checklist");
    const file = await admin.workspace.files.read({
      ...h.ref,
      workspaceId: session.workspaceId,
      path: `skills/${agent.id}/${installed.dir}/docs/list.md`,
    });
    expect(file.content).toBe("- one\n");
    expect((await admin.workspace.skill.addFromLibrary({ ...scope, entryId: skill.id })).deduplicated).toBe(
      true,
    );
  });
});
