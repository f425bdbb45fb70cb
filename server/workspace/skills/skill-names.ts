import path from "node:path";
import { AppError } from "@/server/shared/errors";
import type { ExtractionManifest } from "@/server/workspace/archive/extract-to-machine";

const DEFAULT_SKILL_PARTITION = "default";

/** `default` without an agent; ids that could escape `skills/` are refused (reference §3.1). */
export function partitionName(agentId?: string | null): string {
  if (!agentId) return DEFAULT_SKILL_PARTITION;

  if (agentId.startsWith(".") || /[/\\\u0000]/.test(agentId)) {
    throw new AppError("BAD_REQUEST", `Agent id '${agentId}' is not usable as a skill partition name`);
  }
  return agentId;
}

export function assertPlainName(name: string): void {
  if (!name || name.startsWith(".") || /[/\\\u0000-\u001f\u007f]/.test(name) || name.length > 100) {
    throw new AppError(
      "BAD_REQUEST",
      `Skill directory name '${name}' must be a plain name without path separators`,
    );
  }
}

/** Letters and digits of any script, `_`, `-` and `.` survive; the rest becomes `_` (reference §3.2). */
export function sanitizeDirName(name: string): string {
  const cleaned = name
    .replace(/[^\p{L}\p{N}_.-]/gu, "_")
    .replace(/^\.+/, "")
    .slice(0, 100);
  return cleaned || "skill";
}

/**
 * How many folder levels below the top of an upload the skill folder may sit. The reference looks at the
 * top and its immediate children only (depth 1). Berth goes to depth 3, so a zipped folder that holds the
 * skill folder (`outer/inner/SKILL.md`, also what the dashboard's folder upload of such a folder sends) and
 * a repository tarball (`repo-main/skills/pdf/SKILL.md`) install the skill instead of being refused.
 * Anything deeper is not taken as the skill (a stray SKILL.md in a vendored tree, say): no root → 400.
 */
export const MAX_SKILL_ROOT_DEPTH = 3;

/**
 * The skill root of an extracted upload: the FIRST folder holding SKILL.md, breadth first (the top, then
 * depth 1, then depth 2; among equals, archive order). "" means the top itself. Everything outside the
 * root is discarded by the caller.
 */
export function findSkillRoot(manifest: ExtractionManifest): string {
  let best: { root: string; depth: number } | null = null;
  for (const file of manifest.files) {
    if (path.posix.basename(file.path) !== "SKILL.md") continue;
    const root = path.posix.dirname(file.path);
    const normalised = root === "." ? "" : root;
    const depth = normalised === "" ? 0 : normalised.split("/").length;
    if (depth > MAX_SKILL_ROOT_DEPTH) continue;
    if (!best || depth < best.depth) best = { root: normalised, depth };
  }
  if (!best) {
    throw new AppError(
      "BAD_REQUEST",
      `The skill archive contains no SKILL.md at most ${MAX_SKILL_ROOT_DEPTH} folders below its top`,
      { details: { maxDepth: MAX_SKILL_ROOT_DEPTH } },
    );
  }
  return best.root;
}

/** Whether `label` is `name` itself or `name (n)`: the forms an agent-facing name may take. */
function isLabelFor(label: string, name: string): boolean {
  if (label === name) return true;
  return label.startsWith(`${name} (`) && /^ \([1-9]\d*\)$/.test(label.slice(name.length));
}

/** `name`, else `name (1)`, `name (2)`, ... : the first not in `taken` (the reference's clash rule). */
export function freeLabel(name: string, taken: ReadonlySet<string>): string {
  if (!taken.has(name)) return name;
  for (let suffix = 1; ; suffix += 1) {
    const candidate = `${name} (${suffix})`;
    if (!taken.has(candidate)) return candidate;
  }
}

/**
 * Agent-facing names, unique within a partition (agentscope-spec.md §3.2): a skill keeps the label stored
 * for it at install time while that label still fits its front-matter name and no earlier folder holds
 * it; every other skill gets its name or the first free `name (n)`, in the given (folder) order. So two
 * skills both called `helper` read as `helper` and `helper (1)` everywhere the agent or the API sees them.
 */
export function assignSkillLabels(
  skills: readonly { dir: string; declaredName: string; storedLabel?: string | undefined }[],
): Map<string, string> {
  const labels = new Map<string, string>();
  const taken = new Set<string>();
  for (const skill of skills) {
    const stored = skill.storedLabel;
    if (stored === undefined || taken.has(stored) || !isLabelFor(stored, skill.declaredName)) continue;
    labels.set(skill.dir, stored);
    taken.add(stored);
  }
  for (const skill of skills) {
    if (labels.has(skill.dir)) continue;
    const label = freeLabel(skill.declaredName, taken);
    labels.set(skill.dir, label);
    taken.add(label);
  }
  return labels;
}
