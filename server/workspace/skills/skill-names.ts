import path from "node:path";
import { AppError } from "@/server/shared/errors";
import type { ExtractionManifest } from "@/server/workspace/archive/extract-to-backend";

export const DEFAULT_SKILL_PARTITION = "default";

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

/** The shallowest SKILL.md wins; among equals, the first in archive order. "" means the archive root. */
export function findSkillRoot(manifest: ExtractionManifest): string {
  let best: { root: string; depth: number } | null = null;
  for (const file of manifest.files) {
    if (path.posix.basename(file.path) !== "SKILL.md") continue;
    const root = path.posix.dirname(file.path);
    const normalised = root === "." ? "" : root;
    const depth = normalised === "" ? 0 : normalised.split("/").length;
    if (!best || depth < best.depth) best = { root: normalised, depth };
  }
  if (!best) throw new AppError("BAD_REQUEST", "The skill archive contains no SKILL.md");
  return best.root;
}
