import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AppError } from "@/server/shared/errors";
import type { ArchiveFormat } from "@/server/workspace/archive/archive-entries";
import { SkillStore } from "@/server/workspace/skills/skill-store";
import { backendFor, tarOf, VALID_SKILL_MD, zipOf, type TarFixtureEntry } from "./support/archives";

/** Links inside a skill are kept (as the reference's archive shim allows); links that could leave it are not. */
describe.each(["direct host writes", "tar re-pack"] as const)("skill archive links through %s", (sink) => {
  let base: string;
  let workdir: string;
  let store: SkillStore;
  const skillMd: TarFixtureEntry = { name: "skill/SKILL.md", content: VALID_SKILL_MD("linked") };

  beforeEach(async () => {
    base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-skill-links-")));
    workdir = path.join(base, "ws");
    await fs.mkdir(workdir);
    store = new SkillStore({ machine: backendFor(sink, workdir) });
    await store.initialize();
  });

  afterEach(async () => {
    await fs.rm(base, { recursive: true, force: true });
  });

  const install = (archive: Buffer, format: ArchiveFormat = "tar") =>
    store.installArchive(Readable.from([archive]), format, "agent-1");

  async function refusal(entries: TarFixtureEntry[]): Promise<AppError> {
    const error = await install(await tarOf(entries)).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe("BAD_REQUEST");
    // Nothing installed, no staging folder left behind.
    expect(await fs.readdir(workdir)).toEqual(["skills"]);
    expect(await fs.readdir(path.join(workdir, "skills", "agent-1"))).toEqual([]);
    return error as AppError;
  }

  it("keeps symlinks to files and folders inside the skill, and hard links to earlier files", async () => {
    const { skill } = await install(
      await tarOf([
        skillMd,
        { name: "skill/docs/guide.md", content: "the guide" },
        { name: "skill/latest.md", type: "symlink", linkname: "docs/guide.md" },
        { name: "skill/manual", type: "symlink", linkname: "./docs" },
        { name: "skill/docs/self", type: "symlink", linkname: "../docs/guide.md" },
        { name: "skill/copy.md", type: "link", linkname: "skill/docs/guide.md" },
      ]),
    );
    const root = path.join(workdir, "skills", "agent-1", skill.dir);
    expect(await fs.readlink(path.join(root, "latest.md"))).toBe("docs/guide.md");
    expect(await fs.readFile(path.join(root, "latest.md"), "utf8")).toBe("the guide");
    expect(await fs.readFile(path.join(root, "manual", "guide.md"), "utf8")).toBe("the guide");
    expect(await fs.readFile(path.join(root, "docs", "self"), "utf8")).toBe("the guide");
    const copy = await fs.lstat(path.join(root, "copy.md"));
    expect(copy.isFile()).toBe(true);
    expect(copy.ino).toBe((await fs.stat(path.join(root, "docs", "guide.md"))).ino);
  });

  it("a zip symlink inside the skill is kept", async () => {
    const { skill } = await install(
      await zipOf([
        { name: "z/SKILL.md", content: VALID_SKILL_MD("z") },
        { name: "z/ref.md", content: "ref" },
        { name: "z/alias.md", content: "ref.md", mode: 0o120777 },
      ]),
      "zip",
    );
    const alias = path.join(workdir, "skills", "agent-1", skill.dir, "alias.md");
    expect(await fs.readlink(alias)).toBe("ref.md");
  });

  it("links are part of the content hash: a different target is a different skill", async () => {
    const entries = (target: string): TarFixtureEntry[] => [
      skillMd,
      { name: "skill/a.md", content: "a" },
      { name: "skill/b.md", content: "b" },
      { name: "skill/current.md", type: "symlink", linkname: target },
    ];
    const first = await install(await tarOf(entries("a.md")));
    expect((await install(await tarOf(entries("a.md")))).deduplicated).toBe(true);
    const other = await install(await tarOf(entries("b.md")));
    expect(other.deduplicated).toBe(false);
    expect(other.skill.dir).not.toBe(first.skill.dir);
  });

  it.each<[string, TarFixtureEntry[], string]>([
    [
      "an absolute target",
      [skillMd, { name: "skill/passwd", type: "symlink", linkname: "/etc/passwd" }],
      "symbolic link to an absolute path",
    ],
    [
      "a target inside the archive but outside the skill folder (it would point at a sibling skill)",
      [
        skillMd,
        { name: "other/x.md", content: "x" },
        { name: "skill/x.md", type: "symlink", linkname: "../other/x.md" },
      ],
      "symbolic link points outside the skill folder",
    ],
    [
      "a target that leaves the skill and comes back in (the folder may be renamed)",
      [skillMd, { name: "skill/me", type: "symlink", linkname: "../skill/SKILL.md" }],
      "symbolic link points outside the skill folder",
    ],
    [
      "a write through a link to a folder inside",
      [
        skillMd,
        { name: "skill/sub/", type: "directory" },
        { name: "skill/alias", type: "symlink", linkname: "sub" },
        { name: "skill/alias/file.md", content: "x" },
      ],
      "a parent path is a symbolic link",
    ],
    [
      "`..` after a link, which escapes in the kernel though the lexical path stays inside",
      [
        skillMd,
        { name: "skill/here", type: "symlink", linkname: "." },
        { name: "skill/deep/", type: "directory" },
        { name: "skill/deep/up", type: "symlink", linkname: "../here/../.." },
      ],
      "symbolic link target passes through another link",
    ],
    [
      "a link replacing a file",
      [skillMd, { name: "skill/SKILL.md", type: "symlink", linkname: "x" }],
      "duplicate entry",
    ],
    [
      "a hard link to a later entry",
      [
        skillMd,
        { name: "skill/early", type: "link", linkname: "skill/late" },
        { name: "skill/late", content: "x" },
      ],
      "hard link target is not an earlier file of the archive",
    ],
    [
      "a hard link to a directory",
      [
        skillMd,
        { name: "skill/d/", type: "directory" },
        { name: "skill/dl", type: "link", linkname: "skill/d" },
      ],
      "hard link target is not an earlier file of the archive",
    ],
  ])("refuses %s", async (_label, entries, reason) => {
    const error = await refusal(entries);
    expect(error.details).toMatchObject({ reason });
  });
});
