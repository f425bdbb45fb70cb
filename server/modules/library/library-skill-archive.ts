import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { pack as createTarPack } from "tar-stream";
import { AppError } from "@/server/shared/errors";
import { type ArchiveFormat, tarEntries, zipEntries } from "@/server/workspace/archive/archive-entries";
import { type ArchiveLimits, extractToSink } from "@/server/workspace/archive/extract-to-machine";
import { createHostDirectorySink } from "@/server/workspace/archive/sinks/host-directory-sink";
import { inlineSkillMarkdown, type SeedSkill, ZSeedSkill } from "@/server/workspace/skills/agent-seed";
import { assertInstallableSkillFields, parseSkillMarkdown } from "@/server/workspace/skills/front-matter";
import { findSkillRoot, sanitizeDirName } from "@/server/workspace/skills/skill-names";

/**
 * Library skills are stored inline (an agent default's shape, ZSeedSkill: SKILL.md's name, description and
 * body plus text files), so an upload is turned into that shape here: extracted under the engine's archive
 * validation (EntryTree: no absolute paths, `..`, devices, links out of the folder; byte and entry limits
 * counted as it streams) into a private temp folder, then read back as text. What an inline skill cannot
 * hold is refused with the reason instead of being dropped: links, binary files, more than 50 files, files
 * over 256 KiB. Front-matter keys other than name and description are not kept (SKILL.md is rebuilt).
 */
const LIBRARY_SKILL_LIMITS: ArchiveLimits = {
  // ZSeedSkill's own bounds: 50 files × 256 KiB plus a 256 KiB SKILL.md, with room for what is discarded.
  maxExpandedBytes: 16 * 1024 * 1024,
  maxArchiveBytes: 16 * 1024 * 1024,
  maxEntries: 1_000,
};
const MAX_FILES = 50;
const MAX_FILE_BYTES = 256 * 1024;
const FILE_PATH = /^(?!\/)(?!.*(^|\/)\.\.?(\/|$))[A-Za-z0-9_./-]+$/;

const refuse = (message: string, details: Record<string, unknown> = {}) =>
  new AppError("BAD_REQUEST", message, { userMessage: message, details });

/** The upload's bytes as an inline skill, validated by ZSeedSkill. Nothing is left on disk either way. */
export async function importSkillArchive(stream: Readable, format: ArchiveFormat): Promise<SeedSkill> {
  const temp = await fs.mkdtemp(path.join(os.tmpdir(), "berth-library-skill-"));
  try {
    const target = path.join(temp, "extracted");
    const entries =
      format === "zip"
        ? zipEntries(stream, LIBRARY_SKILL_LIMITS, temp)
        : tarEntries(stream, format === "tar.gz", LIBRARY_SKILL_LIMITS.maxArchiveBytes);
    const manifest = await extractToSink(
      entries,
      await createHostDirectorySink(target),
      LIBRARY_SKILL_LIMITS,
      false,
    );
    const root = findSkillRoot(manifest);
    const prefix = root ? `${root}/` : "";
    const link = manifest.symlinks.find((symlink) => symlink.path.startsWith(prefix));
    if (link)
      throw refuse(`Library skills cannot hold links: ${link.path.slice(prefix.length)}`, {
        entry: link.path,
      });
    const markdown = await readText(path.join(target, prefix, "SKILL.md"), "SKILL.md");
    const parsed = parseSkillMarkdown(markdown);
    if (!parsed.ok) throw refuse(`Invalid SKILL.md: ${parsed.reason}`, { entry: `${prefix}SKILL.md` });
    assertInstallableSkillFields(parsed.skill);
    const files: SeedSkill["files"] = [];
    for (const file of manifest.files) {
      if (!file.path.startsWith(prefix)) continue;
      const relative = file.path.slice(prefix.length);
      if (relative === "SKILL.md") continue;
      if (files.length === MAX_FILES)
        throw refuse(`Library skills hold at most ${MAX_FILES} files besides SKILL.md.`);
      if (!FILE_PATH.test(relative) || relative.length > 200) {
        throw refuse(
          `${relative}: file names in library skills may use letters, digits, '_', '.', '-' and '/' only.`,
          {
            entry: file.path,
          },
        );
      }
      if (file.size > MAX_FILE_BYTES)
        throw refuse(`${relative} is larger than 256 KiB.`, { entry: file.path });
      files.push({ path: relative, content: await readText(path.join(target, file.path), relative) });
    }
    const skill = ZSeedSkill.safeParse({
      kind: "inline",
      name: parsed.skill.name,
      description: parsed.skill.description,
      // SKILL.md is rebuilt as front matter + instructions + "\n": keep a round trip from growing.
      instructions: parsed.skill.body.replace(/^\n+/, "").replace(/\n$/, ""),
      files,
    });
    if (!skill.success) {
      const issue = skill.error.issues[0];
      throw refuse(
        `The skill does not fit the library: ${issue?.path.join(".") ?? ""} ${issue?.message ?? ""}`.trim(),
      );
    }
    return skill.data;
  } finally {
    await fs.rm(temp, { recursive: true, force: true });
  }
}

async function readText(file: string, label: string): Promise<string> {
  const bytes = await fs.readFile(file);
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw refuse(`${label} is not UTF-8 text: library skills hold text files only.`, { entry: label });
  }
}

/**
 * An inline skill as an uncompressed tar of one folder (SKILL.md and its files), for the engine's archive
 * install into a workspace, which validates it like any upload.
 */
export function inlineSkillTar(skill: SeedSkill): { stream: Readable; format: ArchiveFormat } {
  const tar = createTarPack();
  const dir = sanitizeDirName(skill.name);
  const add = (name: string, content: string) =>
    tar.entry({ name: `${dir}/${name}`, mtime: new Date(0), mode: 0o644 }, Buffer.from(content, "utf8"));
  add("SKILL.md", inlineSkillMarkdown(skill));
  for (const file of skill.files) add(file.path, file.content);
  tar.finalize();
  return { stream: Readable.from(tar), format: "tar" };
}
