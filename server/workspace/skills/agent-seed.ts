import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { text } from "node:stream/consumers";
import { z } from "zod";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { SKILL_DESCRIPTION_MAX_CHARS, SKILL_NAME_MAX_CHARS } from "@/server/workspace/skills/front-matter";
import { sanitizeDirName } from "@/server/workspace/skills/skill-names";
import type { SkillStore } from "@/server/workspace/skills/skill-store";

/**
 * A default skill of an agent (Agent.defaultSkills), the platform's form of the reference's `skill_paths`
 * (agentscope-spec.md §3.2): the reference seeds host folders, which a tenant cannot name, so an agent's
 * default skill is the skill itself, inline. `instructions` is SKILL.md's body (the front matter is built
 * from `name` and `description`); `files` are extra text files of the skill folder (scripts, references).
 */
const ZSkillFilePath = z
  .string()
  .min(1)
  .max(200)
  .regex(/^(?!\/)(?!.*(^|\/)\.\.?(\/|$))[A-Za-z0-9_./-]+$/, "a relative path of plain segments")
  .refine((file) => file !== "SKILL.md", "SKILL.md is built from name, description and instructions");

export const ZSeedSkill = z
  .object({
    kind: z.literal("inline"),
    name: z.string().trim().min(1).max(SKILL_NAME_MAX_CHARS),
    description: z.string().trim().min(1).max(SKILL_DESCRIPTION_MAX_CHARS),
    instructions: z.string().max(256 * 1024),
    files: z
      .array(z.object({ path: ZSkillFilePath, content: z.string().max(256 * 1024) }).strict())
      .max(50)
      .default([]),
  })
  .strict();
export type SeedSkill = z.infer<typeof ZSeedSkill>;

/** The marker in the partition that says which default skills were seeded (by name), so each is seeded once. */
const MARKER = ".seeded-defaults.json";
const ZMarker = z.object({ version: z.literal(1), seeded: z.array(z.string()) });

/** Per store: the agents whose current default list was already checked in this process. */
const checked = new WeakMap<SkillStore, Map<string, string>>();

/**
 * Installs the agent's default skills into its partition, each once per workspace generation: a default
 * skill seeded earlier is never re-installed (the agent may have removed it on purpose, as with the
 * reference's seed), and one added to the agent later is seeded at the next use. Concurrent processes may
 * both install a skill: the store's content deduplication keeps one copy.
 */
export async function seedAgentSkills(
  store: SkillStore,
  machine: WorkspaceMachine,
  agentId: string,
  skills: readonly SeedSkill[],
): Promise<void> {
  const fingerprint = createHash("sha256").update(JSON.stringify(skills)).digest("hex");
  const seen = checked.get(store) ?? new Map<string, string>();
  checked.set(store, seen);
  if (seen.get(agentId) === fingerprint) return;
  // Listing equips the partition from the workspace seed first (so the marker lands in a real partition).
  await store.list(agentId);
  const markerPath = path.posix.join(store.partitionPath(agentId), MARKER);
  const seeded = new Set(await readMarker(machine, markerPath));
  const missing = skills.filter((skill) => !seeded.has(skill.name));
  for (const skill of missing) {
    await installInline(store, agentId, skill);
    seeded.add(skill.name);
    await machine.writeFile(markerPath, JSON.stringify({ version: 1, seeded: [...seeded] }));
  }
  seen.set(agentId, fingerprint);
}

async function readMarker(machine: WorkspaceMachine, markerPath: string): Promise<string[]> {
  if (!(await machine.stat(markerPath))) return [];
  try {
    const parsed = ZMarker.safeParse(JSON.parse(await text(await machine.readFile(markerPath))));
    return parsed.success ? parsed.data.seeded : [];
  } catch {
    return [];
  }
}

/** SKILL.md of an inline skill: front matter from its name and description, then its instructions. */
export function inlineSkillMarkdown(skill: Pick<SeedSkill, "name" | "description" | "instructions">): string {
  // JSON strings are valid YAML double-quoted scalars: no front-matter injection through the name.
  const front = `---\nname: ${JSON.stringify(skill.name)}\ndescription: ${JSON.stringify(skill.description)}\n---\n`;
  return `${front}${skill.instructions}\n`;
}

/** Writes the skill as a host folder (SKILL.md with YAML-safe front matter, its files) and installs it. */
async function installInline(store: SkillStore, agentId: string, skill: SeedSkill): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-seed-skill-"));
  try {
    await fs.writeFile(path.join(dir, "SKILL.md"), inlineSkillMarkdown(skill));
    for (const file of skill.files) {
      const target = path.join(dir, ...file.path.split("/"));
      await fs.mkdir(path.dirname(target), { recursive: true });
      await fs.writeFile(target, file.content);
    }
    await store.installFromDirectory(dir, agentId, { dirName: sanitizeDirName(skill.name) });
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
