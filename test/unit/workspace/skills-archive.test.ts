import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AppError } from "@/server/shared/errors";
import type { ArchiveFormat } from "@/server/workspace/archive/archive-entries";
import { SkillStore } from "@/server/workspace/skills/skill-store";
import {
  backendFor,
  VALID_SKILL_MD,
  manyEntriesZip,
  renameZipEntry,
  tarOf,
  tinyEntriesTar,
  zipBomb,
  zipOf,
  type TarFixtureEntry,
} from "./support/archives";

/** Both ways entries reach a backend: direct host writes (local fast path) and the tar re-pack. */
const SINKS = ["direct host writes", "tar re-pack"] as const;

describe.each(SINKS)("skill archives through %s", (sink) => {
  let base: string;
  let workdir: string;
  let store: SkillStore;
  const MiB = 1024 * 1024;
  /**
   * Caps below the defaults (500 MiB expanded, 10,000 entries), so the archives that cross them stay small:
   * what an over-the-cap test spends is the bytes and entries written before the cap refuses them (a
   * 10 MiB cap and 10,000 entries took seconds a test). The archives keep the ratios to the caps.
   */
  const STORE_LIMITS = { maxExpandedBytes: 4 * MiB, maxEntries: 1_000 };

  beforeEach(async () => {
    base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-skills-")));
    workdir = path.join(base, "ws");
    await fs.mkdir(workdir);
    store = new SkillStore({ machine: backendFor(sink, workdir), limits: STORE_LIMITS });
    await store.initialize();
  });

  afterEach(async () => {
    await fs.rm(base, { recursive: true, force: true });
  });

  async function install(archive: Buffer | Readable, format: ArchiveFormat, agentId = "agent-1") {
    const stream = Buffer.isBuffer(archive) ? Readable.from([archive]) : archive;
    return store.installArchive(stream, format, agentId);
  }

  async function rejection(promise: Promise<unknown>): Promise<AppError> {
    const error = await promise.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }

  /** Nothing outside the workdir, no staging left inside it, and the partition still holds no skill. */
  async function expectNothingWritten(): Promise<void> {
    expect(await fs.readdir(base)).toEqual(["ws"]);
    expect(await fs.readdir(workdir)).toEqual(["skills"]);
    expect((await fs.readdir(path.join(workdir, "skills"))).sort()).toEqual([".seed", "agent-1"]);
    expect(await fs.readdir(path.join(workdir, "skills", "agent-1"))).toEqual([]);
  }

  describe("hostile archives are rejected with nothing written outside the target", () => {
    const skillMd: TarFixtureEntry = { name: "skill/SKILL.md", content: VALID_SKILL_MD("evil") };

    it.each<[string, TarFixtureEntry[], string]>([
      [
        "zip slip (../)",
        [skillMd, { name: "skill/../../evil.txt", content: "x" }],
        "parent directory reference",
      ],
      ["a leading ../", [{ name: "../evil.txt", content: "x" }, skillMd], "parent directory reference"],
      ["an absolute path", [skillMd, { name: "/tmp/berth-evil.txt", content: "x" }], "absolute path"],
      [
        "a symlink escaping the target, then a write through it",
        [
          skillMd,
          { name: "skill/link", type: "symlink", linkname: "../../.." },
          { name: "skill/link/evil.txt", content: "x" },
        ],
        "symbolic link points outside the archive",
      ],
      [
        "a hardlink to a host file",
        [skillMd, { name: "skill/passwd", type: "link", linkname: "/etc/passwd" }],
        "hard link target is not an earlier file of the archive",
      ],
      [
        "a device",
        [skillMd, { name: "skill/tty", type: "character-device" }],
        "device files are not allowed",
      ],
      ["a fifo", [skillMd, { name: "skill/pipe", type: "fifo" }], "fifos are not allowed"],
      [
        "a control character",
        [skillMd, { name: "skill/bell\u0007.txt", content: "x" }],
        "control character in name",
      ],
      [
        "an escape sequence",
        [skillMd, { name: "skill/\u001b[31mred", content: "x" }],
        "control character in name",
      ],
      ["a backslash path", [skillMd, { name: "skill\\..\\..\\evil.txt", content: "x" }], "backslash in name"],
      [
        "a file replacing a directory",
        [skillMd, { name: "skill/d/a", content: "x" }, { name: "skill/d", content: "y" }],
        "file replaces a directory",
      ],
    ])("tar with %s → BAD_REQUEST naming the entry", async (_label, entries, reason) => {
      const error = await rejection(install(await tarOf(entries), "tar"));
      expect(error.code).toBe("BAD_REQUEST");
      expect(error.details).toMatchObject({ reason });
      expect(typeof error.details?.entry).toBe("string");
      await expectNothingWritten();
      await expect(fs.stat("/tmp/berth-evil.txt")).rejects.toThrow();
    });

    it("rejects half-way through (after valid files were already streamed) and cleans the staging folder", async () => {
      const entries: TarFixtureEntry[] = [
        skillMd,
        { name: "skill/big.bin", content: randomBytes(2 * MiB) },
        { name: "skill/../../../evil.txt", content: "x" },
      ];
      const error = await rejection(install(await tarOf(entries, true), "tar.gz"));
      expect(error.details).toMatchObject({ entry: "skill/../../../evil.txt" });
      await expectNothingWritten();
    });

    it("zip slip and absolute paths in a zip → BAD_REQUEST", async () => {
      const slip = renameZipEntry(
        await zipOf([
          { name: "s/SKILL.md", content: VALID_SKILL_MD("s") },
          { name: "xx/evil.txt", content: "x" },
        ]),
        "xx/evil.txt",
        "../evil.txt",
      );
      expect((await rejection(install(slip, "zip"))).code).toBe("BAD_REQUEST");
      await expectNothingWritten();

      const absolute = renameZipEntry(
        await zipOf([
          { name: "s/SKILL.md", content: VALID_SKILL_MD("s") },
          { name: "xtmp/berth-evil.txt", content: "x" },
        ]),
        "xtmp/berth-evil.txt",
        "/tmp/berth-evil.txt",
      );
      expect((await rejection(install(absolute, "zip"))).code).toBe("BAD_REQUEST");
      await expectNothingWritten();
      await expect(fs.stat("/tmp/berth-evil.txt")).rejects.toThrow();
    });

    it("symlinks and NUL names in a zip → BAD_REQUEST", async () => {
      const symlink = await zipOf([
        { name: "s/SKILL.md", content: VALID_SKILL_MD("s") },
        { name: "s/link", content: "../../../etc", mode: 0o120777 },
      ]);
      const error = await rejection(install(symlink, "zip"));
      expect(error.details).toMatchObject({
        entry: "s/link",
        reason: "symbolic link points outside the archive",
      });
      await expectNothingWritten();

      const nul = renameZipEntry(
        await zipOf([
          { name: "s/SKILL.md", content: VALID_SKILL_MD("s") },
          { name: "s/aXb", content: "x" },
        ]),
        "s/aXb",
        "s/a\0b",
      );
      expect((await rejection(install(nul, "zip"))).code).toBe("BAD_REQUEST");
      await expectNothingWritten();
    });

    it("a zip bomb (20 MiB of zeros in ~20 KiB) over a 4 MiB cap → PAYLOAD_TOO_LARGE", async () => {
      const bomb = await zipBomb(20 * MiB);
      expect(bomb.length).toBeLessThan(MiB / 4);
      const error = await rejection(install(bomb, "zip"));
      expect(error.code).toBe("PAYLOAD_TOO_LARGE");
      expect(error.details).toMatchObject({ limit: 4 * MiB, limitName: "maxExpandedBytes" });
      await expectNothingWritten();
    });

    it("counts actual inflated bytes across entries (each under the cap, the sum over it)", async () => {
      const entries: TarFixtureEntry[] = [{ name: "s/SKILL.md", content: VALID_SKILL_MD("s") }];
      for (let i = 0; i < 12; i += 1)
        entries.push({ name: `s/zeros-${i}.bin`, content: Buffer.alloc(MiB / 2) });
      const error = await rejection(install(await tarOf(entries, true), "tar.gz"));
      expect(error.code).toBe("PAYLOAD_TOO_LARGE");
      await expectNothingWritten();
    });

    it("10,000 tiny tar entries are refused by a 1,000-entry cap without reading the whole stream", async () => {
      const stream = tinyEntriesTar(10_000);
      const error = await rejection(install(stream, "tar"));
      expect(error.code).toBe("PAYLOAD_TOO_LARGE");
      expect(error.details).toMatchObject({ limit: 1_000, limitName: "maxEntries" });
      expect(stream.produced()).toBeLessThan(2_000);
      await expectNothingWritten();
    });

    it("10,000 tiny zip entries are refused from the central directory count (1,000-entry cap)", async () => {
      const error = await rejection(install(manyEntriesZip(10_000), "zip"));
      expect(error.code).toBe("PAYLOAD_TOO_LARGE");
      expect(error.details).toMatchObject({ seen: 10_000, limit: 1_000, limitName: "maxEntries" });
      await expectNothingWritten();
    });

    it("an archive larger than maxArchiveBytes → PAYLOAD_TOO_LARGE", async () => {
      const archive = await tarOf([
        { name: "s/SKILL.md", content: VALID_SKILL_MD("s") },
        { name: "s/data", content: randomBytes(64 * 1024) },
      ]);
      const error = await rejection(
        store.installArchive(Readable.from([archive]), "tar", "agent-1", {
          limits: { maxArchiveBytes: 16 * 1024 },
        }),
      );
      expect(error.details).toMatchObject({ limitName: "maxArchiveBytes" });
      await expectNothingWritten();
    });

    it("corrupt data and archives without a valid SKILL.md → BAD_REQUEST", async () => {
      expect((await rejection(install(Buffer.from("not a gzip stream"), "tar.gz"))).code).toBe("BAD_REQUEST");
      expect((await rejection(install(Buffer.from("not a zip"), "zip"))).code).toBe("BAD_REQUEST");
      const noSkill = await tarOf([{ name: "s/README.md", content: "hi" }]);
      expect((await rejection(install(noSkill, "tar"))).message).toContain("no SKILL.md");
      const badFrontMatter = await tarOf([{ name: "s/SKILL.md", content: "---\nname: [unclosed\n---\n" }]);
      expect((await rejection(install(badFrontMatter, "tar"))).message).toContain("not valid YAML");
      await expectNothingWritten();
    });
  });

  describe("valid archives install", () => {
    it("zip: the skill folder keeps its name, content and executable bit", async () => {
      const zip = await zipOf([
        { name: "my-skill/", directory: true },
        { name: "my-skill/SKILL.md", content: VALID_SKILL_MD("my-skill", "Zipped") },
        { name: "my-skill/scripts/run.sh", content: "#!/bin/sh\necho hi\n", mode: 0o100755 },
      ]);
      const { skill, deduplicated } = await install(zip, "zip");
      expect(deduplicated).toBe(false);
      expect(skill).toMatchObject({ name: "my-skill", description: "Zipped", dir: "my-skill" });
      const script = path.join(workdir, "skills", "agent-1", "my-skill", "scripts", "run.sh");
      expect(await fs.readFile(script, "utf8")).toBe("#!/bin/sh\necho hi\n");
      expect((await fs.stat(script)).mode & 0o111).not.toBe(0);
      expect(await fs.readdir(workdir)).toEqual(["skills"]);
    });

    it("tar with SKILL.md at the top: the folder is named from the front matter", async () => {
      const tar = await tarOf([
        { name: "./", type: "directory" },
        { name: "./SKILL.md", content: VALID_SKILL_MD("PDF Tools/v2") },
      ]);
      const { skill } = await install(tar, "tar");
      expect(skill.dir).toBe("PDF_Tools_v2");
      expect(skill.name).toBe("PDF Tools/v2");
    });

    it("tar.gz: the shallowest folder with SKILL.md is the skill; the rest is discarded", async () => {
      const tarGz = await tarOf(
        [
          { name: "repo-main/README.md", content: "readme" },
          { name: "repo-main/skills/pdf/SKILL.md", content: VALID_SKILL_MD("pdf") },
          { name: "repo-main/skills/pdf/nested/SKILL.md", content: VALID_SKILL_MD("nested") },
          { name: "repo-main/skills/pdf/ref.md", content: "ref" },
        ],
        true,
      );
      const { skill } = await install(tarGz, "tar.gz");
      expect(skill).toMatchObject({ name: "pdf", dir: "pdf" });
      const installed = path.join(workdir, "skills", "agent-1", "pdf");
      expect((await fs.readdir(installed)).sort()).toEqual(["SKILL.md", "nested", "ref.md"]);
      expect(await fs.readdir(workdir)).toEqual(["skills"]);
    });

    it("a skill folder nested in a wrapper installs as itself; one deeper than 3 folders is no skill root", async () => {
      const nested = await tarOf([
        { name: "outer/README.md", content: "wrapper" },
        { name: "outer/inner/SKILL.md", content: VALID_SKILL_MD("inner") },
        { name: "outer/inner/run.sh", content: "echo hi" },
      ]);
      const { skill } = await install(nested, "tar");
      expect(skill).toMatchObject({ name: "inner", dir: "inner" });
      const installed = path.join(workdir, "skills", "agent-1", "inner");
      expect((await fs.readdir(installed)).sort()).toEqual(["SKILL.md", "run.sh"]);

      const tooDeep = await tarOf([{ name: "a/b/c/d/SKILL.md", content: VALID_SKILL_MD("deep") }]);
      const error = await rejection(install(tooDeep, "tar"));
      expect(error).toMatchObject({ code: "BAD_REQUEST", details: { maxDepth: 3 } });
    });

    it("name clashes get -1, -2; identical content is deduplicated, across formats too", async () => {
      const dirs: string[] = [];
      for (const description of ["one", "two", "three"]) {
        const tar = await tarOf([{ name: "pack/SKILL.md", content: VALID_SKILL_MD("pack", description) }]);
        dirs.push((await install(tar, "tar")).skill.dir);
      }
      expect(dirs).toEqual(["pack", "pack-1", "pack-2"]);

      const again = await install(
        await tarOf([{ name: "pack/SKILL.md", content: VALID_SKILL_MD("pack", "two") }]),
        "tar",
      );
      expect(again).toMatchObject({ deduplicated: true, skill: { dir: "pack-1" } });
      const asZip = await zipOf([{ name: "other-name/SKILL.md", content: VALID_SKILL_MD("pack", "three") }]);
      expect(await install(asZip, "zip")).toMatchObject({ deduplicated: true, skill: { dir: "pack-2" } });

      const listing = await store.list("agent-1");
      expect(listing.skills.map((skill) => skill.dir)).toEqual(["pack", "pack-1", "pack-2"]);
    });

    it("an explicit dirName is used, and must be a plain name", async () => {
      const tar = await tarOf([{ name: "x/SKILL.md", content: VALID_SKILL_MD("x") }]);
      const { skill } = await store.installArchive(Readable.from([tar]), "tar", null, { dirName: "chosen" });
      expect(skill.path).toBe(path.join(workdir, "skills", "default", "chosen"));
      const error = await rejection(
        store.installArchive(Readable.from([tar]), "tar", null, { dirName: "../up" }),
      );
      expect(error.code).toBe("BAD_REQUEST");
    });
  });
});
