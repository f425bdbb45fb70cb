import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AppError } from "@/server/shared/errors";
import { HostFolderMachine } from "@/server/workspace/drivers/host-folder/host-folder-machine";
import type { EngineLogger } from "@/server/workspace/mcp/types";
import { parseSkillMarkdown } from "@/server/workspace/skills/front-matter";
import { SkillStore } from "@/server/workspace/skills/skill-store";

const FIXTURES = path.resolve("test/fixtures/skills");
const HELLO = path.join(FIXTURES, "hello-skill");

let base: string;
let workdir: string;
let warnings: string[];

function makeStore(seedPaths: string[] = [HELLO]): SkillStore {
  const logger: EngineLogger = { warn: (_details, message) => warnings.push(message) };
  return new SkillStore({ machine: new HostFolderMachine({ workdir }), seedPaths, logger });
}

beforeEach(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-skill-store-")));
  workdir = path.join(base, "ws");
  await fs.mkdir(workdir);
  warnings = [];
});

afterEach(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

/** Nine-fold aliases nested twelve deep: 9^12 nodes if expanded; the alias cap must stop it. */
function aliasBomb(): string {
  const lines = ["a: &a [x,x,x,x,x,x,x,x,x]"];
  let previous = "a";
  for (let level = 0; level < 12; level += 1) {
    lines.push(`l${level}: &l${level} [${Array.from({ length: 9 }, () => `*${previous}`).join(",")}]`);
    previous = `l${level}`;
  }
  return `---\n${lines.join("\n")}\nname: x\ndescription: y\n---\n`;
}

describe("SKILL.md front matter", () => {
  it("parses name, description, metadata and body (BOM and CRLF tolerated)", () => {
    const parsed = parseSkillMarkdown(
      "\uFEFF---\r\nname: pdf\r\ndescription: Reads PDFs\r\nlicense: MIT\r\n---\r\n# Body\r\n",
    );
    expect(parsed).toEqual({
      ok: true,
      skill: {
        name: "pdf",
        description: "Reads PDFs",
        metadata: { name: "pdf", description: "Reads PDFs", license: "MIT" },
        body: "# Body\n",
      },
    });
  });

  it.each([
    ["no fence", "name: x\n", "does not start"],
    ["no closing fence", "---\nname: x\ndescription: y\n", "no closing"],
    ["invalid YAML", "---\nname: [x\n---\n", "not valid YAML"],
    ["a list instead of a mapping", "---\n- a\n- b\n---\n", "not a YAML mapping"],
    ["missing name", "---\ndescription: y\n---\n", "no name"],
    ["empty description", "---\nname: x\ndescription: '  '\n---\n", "no description"],
    ["an alias bomb (billion laughs)", aliasBomb(), "not valid YAML"],
  ])("reports %s as a reason instead of throwing", (_label, text, reason) => {
    const parsed = parseSkillMarkdown(text);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason).toContain(reason);
  });
});

describe("SkillStore partitions and seeding", () => {
  it("seeds .seed from host paths once (hash dedup across re-initialise) and equips partitions from it", async () => {
    const store = makeStore();
    await store.initialize();
    await makeStore().initialize();
    expect((await fs.readdir(path.join(workdir, "skills", ".seed"))).sort()).toEqual([
      ".content-index.json",
      "hello-skill",
    ]);

    const listing = await store.list("agent-1");
    expect(listing.skipped).toEqual([]);
    expect(listing.skills).toHaveLength(1);
    expect(listing.skills[0]).toMatchObject({
      name: "hello",
      description: "Says hello to the user",
      dir: "hello-skill",
      path: path.join(workdir, "skills", "agent-1", "hello-skill"),
      metadata: { license: "MIT" },
    });
    expect(listing.skills[0]!.markdown).toContain("# Hello");
    const script = path.join(workdir, "skills", "agent-1", "hello-skill", "scripts", "hello.sh");
    expect((await fs.stat(script)).mode & 0o111).not.toBe(0);
    expect((await store.list(null)).skills.map((skill) => skill.dir)).toEqual(["hello-skill"]);
    expect((await fs.readdir(path.join(workdir, "skills"))).sort()).toEqual([".seed", "agent-1", "default"]);
  });

  it("equips once: a seed skill the agent removed stays removed; other agents keep theirs", async () => {
    const store = makeStore();
    await store.initialize();
    await store.remove("hello", "agent-1");
    expect((await store.list("agent-1")).skills).toEqual([]);
    expect((await makeStore().list("agent-1")).skills).toEqual([]);
    expect((await store.list("agent-2")).skills.map((skill) => skill.name)).toEqual(["hello"]);
  });

  it("purgeAgent deletes the partition; the next call re-equips it from the seed", async () => {
    const store = makeStore();
    await store.initialize();
    await store.remove("hello-skill", "agent-1");
    await store.purgeAgent("agent-1");
    await expect(fs.stat(path.join(workdir, "skills", "agent-1"))).rejects.toThrow();
    expect((await store.list("agent-1")).skills.map((skill) => skill.name)).toEqual(["hello"]);
  });

  it("refuses agent ids that could escape skills/", async () => {
    const store = makeStore([]);
    await store.initialize();
    for (const agentId of [".seed", "../x", "a/b", "a\\b"]) {
      await expect(store.list(agentId)).rejects.toMatchObject({ code: "BAD_REQUEST" });
    }
  });

  it("skips seed paths without a SKILL.md or with bad front matter, with a logged reason", async () => {
    const store = makeStore([FIXTURES, path.join(FIXTURES, "bad-front-matter"), HELLO]);
    await store.initialize();
    expect(warnings).toEqual([
      "Skill path has no SKILL.md; not seeding it",
      "Seeding skill failed; skipping it",
    ]);
    expect((await store.list("a")).skills.map((skill) => skill.name)).toEqual(["hello"]);
  });
});

describe("SkillStore list, read, install from a directory, remove", () => {
  it("lists a folder with invalid front matter as skipped with its reason, not as an error", async () => {
    const store = makeStore([]);
    await store.initialize();
    await store.list("a");
    const broken = path.join(workdir, "skills", "a", "broken");
    await fs.mkdir(broken);
    await fs.writeFile(path.join(broken, "SKILL.md"), "---\nname: [x\n---\n");
    await fs.mkdir(path.join(workdir, "skills", "a", "empty"));
    const listing = await store.list("a");
    expect(listing.skills).toEqual([]);
    expect(listing.skipped).toEqual([
      { dir: "broken", reason: expect.stringContaining("not valid YAML") as unknown },
      { dir: "empty", reason: "SKILL.md not found" },
    ]);
  });

  it("installs from a host directory, dedups identical content, suffixes a changed copy, reads and removes", async () => {
    const store = makeStore([]);
    await store.initialize();
    const first = await store.installFromDirectory(HELLO, "a");
    expect(first).toMatchObject({ deduplicated: false, skill: { dir: "hello-skill", name: "hello" } });
    expect(await store.installFromDirectory(HELLO, "a")).toMatchObject({
      deduplicated: true,
      skill: { dir: "hello-skill" },
    });

    const changed = path.join(base, "hello-skill");
    await fs.cp(HELLO, changed, { recursive: true });
    await fs.appendFile(path.join(changed, "scripts", "hello.sh"), "echo changed\n");
    expect(await store.installFromDirectory(changed, "a")).toMatchObject({ skill: { dir: "hello-skill-1" } });

    const { content } = await store.read("hello-skill-1", "a");
    expect(content).toBe(await fs.readFile(path.join(HELLO, "SKILL.md"), "utf8"));
    await store.remove("hello-skill-1", "a");
    expect((await store.list("a")).skills.map((skill) => skill.dir)).toEqual(["hello-skill"]);
    expect(await fs.readdir(workdir)).toEqual(["skills"]);
  });

  it("refuses a host directory holding a symlink to an absolute path, and one without SKILL.md", async () => {
    const store = makeStore([]);
    await store.initialize();
    const linked = path.join(base, "linked");
    await fs.cp(HELLO, linked, { recursive: true });
    await fs.symlink("/etc/passwd", path.join(linked, "passwd"));
    await expect(store.installFromDirectory(linked, "a")).rejects.toMatchObject({
      code: "BAD_REQUEST",
      details: { entry: "linked/passwd", reason: "symbolic link to an absolute path" },
    });
    await expect(store.installFromDirectory(base, "a")).rejects.toMatchObject({ code: "BAD_REQUEST" });
    expect((await store.list("a")).skills).toEqual([]);
  });

  it("two skills with the same front-matter name stay distinguishable: `name (1)`, read by it, removed by dir", async () => {
    const store = makeStore([]);
    await store.initialize();
    const makeSkill = async (folder: string, body: string) => {
      const dir = path.join(base, folder);
      await fs.mkdir(dir, { recursive: true });
      await fs.writeFile(
        path.join(dir, "SKILL.md"),
        `---\nname: helper\ndescription: ${body}\n---\n${body}\n`,
      );
      return dir;
    };
    // The second folder sorts first: the name stays with the skill installed first.
    const first = await store.installFromDirectory(await makeSkill("zeta", "first"), "a");
    const second = await store.installFromDirectory(await makeSkill("alpha", "second"), "a");
    expect(first.skill).toMatchObject({ dir: "zeta", name: "helper", declaredName: "helper" });
    expect(second.skill).toMatchObject({ dir: "alpha", name: "helper (1)", declaredName: "helper" });
    const listed = (await store.list("a")).skills.map(({ dir, name }) => ({ dir, name }));
    expect(listed).toEqual([
      { dir: "alpha", name: "helper (1)" },
      { dir: "zeta", name: "helper" },
    ]);
    expect((await store.read("helper (1)", "a")).content).toContain("second");
    expect((await store.read("helper", "a")).content).toContain("first");

    // A name two skills declare is not a removal target: CONFLICT naming both; nothing is deleted.
    const ambiguous = await store.remove("helper", "a").catch((error: unknown) => error);
    expect(ambiguous).toMatchObject({
      code: "CONFLICT",
      details: {
        candidates: [
          { dir: "alpha", name: "helper (1)" },
          { dir: "zeta", name: "helper" },
        ],
      },
    });
    expect((await store.list("a")).skills).toHaveLength(2);
    await store.remove({ dir: "alpha" }, "a");
    expect((await store.list("a")).skills.map(({ dir, name }) => ({ dir, name }))).toEqual([
      { dir: "zeta", name: "helper" },
    ]);
    // Unambiguous again: the name is enough.
    await store.remove("helper", "a");
    expect((await store.list("a")).skills).toEqual([]);
    await expect(store.remove({ dir: "alpha" }, "a")).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("a suffixed name removes exactly that skill; hand-added folders get suffixes too", async () => {
    const store = makeStore([]);
    await store.initialize();
    const partition = store.partitionPath("a");
    for (const [folder, body] of [
      ["one", "first"],
      ["two", "second"],
    ]) {
      await fs.mkdir(path.join(partition, folder!), { recursive: true });
      await fs.writeFile(
        path.join(partition, folder!, "SKILL.md"),
        `---\nname: helper\ndescription: ${body}\n---\n`,
      );
    }
    expect((await store.list("a")).skills.map((skill) => skill.name)).toEqual(["helper", "helper (1)"]);
    await store.remove("helper (1)", "a");
    expect((await store.list("a")).skills.map((skill) => skill.dir)).toEqual(["one"]);
  });

  it("read and remove of an unknown skill are typed NOT_FOUND errors", async () => {
    const store = makeStore([]);
    await store.initialize();
    const error = await store.remove("ghost", "a").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: "NOT_FOUND", details: { name: "ghost", partition: "a" } });
    await expect(store.read("ghost")).rejects.toMatchObject({ code: "NOT_FOUND" });
  });
});
