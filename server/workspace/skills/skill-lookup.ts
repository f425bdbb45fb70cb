import { z } from "zod";
import { AppError } from "@/server/shared/errors";

/** A skill by its folder (stable, unambiguous) or by name (agent-facing, or front-matter when unique). */
export type SkillRef = string | { dir: string };

/** A partition's `.content-index.json`: per folder, the front-matter name, dedupe facts and the label. */
export const ZContentIndex = z.object({
  version: z.literal(1),
  // `shape` and an optional content `hash` (see skill-dedup.ts); entries from before shapes have a hash only.
  skills: z.record(
    z.string(),
    z.object({
      name: z.string(),
      hash: z.string().optional(),
      shape: z.string().optional(),
      /** The agent-facing name given at install time (kept while it still fits the front-matter name). */
      label: z.string().optional(),
    }),
  ),
});
export type TContentIndex = z.infer<typeof ZContentIndex>;

type Named = { dir: string; name: string; declaredName: string };

/**
 * Resolves a reference among a partition's skills: `{ dir }` by folder; a name by agent-facing name, then
 * by front-matter name, then (for callers that pass a folder as the name) by folder. With `strict` (removal),
 * an agent-facing name that several skills declare (`helper` when two skills are called `helper`) is
 * ambiguous: CONFLICT listing the candidates (dir and name), never a guess. Unknown → NOT_FOUND.
 */
export function resolveSkillRef<T extends Named>(
  skills: readonly T[],
  ref: SkillRef,
  partition: string,
  strict: boolean,
): T {
  const candidatesOf = (list: readonly T[]) => list.map(({ dir, name }) => ({ dir, name }));
  if (typeof ref !== "string") {
    const skill = skills.find((candidate) => candidate.dir === ref.dir);
    if (skill) return skill;
    throw new AppError("NOT_FOUND", `Skill folder '${ref.dir}' not found`, {
      details: { dir: ref.dir, partition, available: candidatesOf(skills) },
    });
  }
  const declared = skills.filter((candidate) => candidate.declaredName === ref);
  const labelled = skills.find((candidate) => candidate.name === ref);
  if (labelled && !(strict && declared.length > 1)) return labelled;
  if (declared.length > 1) {
    throw new AppError("CONFLICT", `Skill name '${ref}' is ambiguous in partition ${partition}`, {
      userMessage: `${declared.length} skills are named '${ref}'; name one by its folder (dir): ${declared.map((skill) => skill.dir).join(", ")}.`,
      details: { name: ref, partition, candidates: candidatesOf(declared) },
    });
  }
  const skill = declared[0] ?? skills.find((candidate) => candidate.dir === ref);
  if (!skill) {
    throw new AppError("NOT_FOUND", `Skill '${ref}' not found`, {
      details: { name: ref, partition, available: candidatesOf(skills) },
    });
  }
  return skill;
}
