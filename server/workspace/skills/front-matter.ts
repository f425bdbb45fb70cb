import { parse as parseYaml } from "yaml";
import { AppError } from "@/server/shared/errors";
import { assertNoUnsafeStrings } from "@/server/shared/unsafe-strings";

/**
 * The longest name and description a skill may be installed with, on every path (workspace and library
 * uploads, inline skills). The reference sets none; Anthropic's SKILL.md spec allows 64 and 1,024. Names
 * keep the 100 characters inline skills (library, agent defaults) always allowed, so a library skill
 * installs into a workspace whatever path it came by.
 */
export const SKILL_NAME_MAX_CHARS = 100;
export const SKILL_DESCRIPTION_MAX_CHARS = 1_024;

/** A SKILL.md whose front matter has the two fields every skill needs. */
type ParsedSkillMarkdown = {
  name: string;
  description: string;
  /** Everything in the front matter (license, allowed-tools, ...), as parsed. */
  metadata: Record<string, unknown>;
  /** The markdown after the closing fence. */
  body: string;
};

export type SkillMarkdownParse = { ok: true; skill: ParsedSkillMarkdown } | { ok: false; reason: string };

const FENCE = /^---[ \t]*$/;
const CLOSING_FENCE = /^(---|\.\.\.)[ \t]*$/;

/**
 * Parses a SKILL.md: YAML front matter between `---` fences (as python-frontmatter reads it), which must
 * hold a non-empty `name` and `description`. Never throws: a bad file gives a reason to report and skip.
 */
export function parseSkillMarkdown(text: string): SkillMarkdownParse {
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
  if (!FENCE.test(lines[0] ?? ""))
    return { ok: false, reason: "SKILL.md does not start with a --- front matter fence" };
  const end = lines.findIndex((line, index) => index > 0 && CLOSING_FENCE.test(line));
  if (end === -1) return { ok: false, reason: "SKILL.md front matter has no closing --- fence" };
  let data: unknown;
  try {
    // maxAliasCount bounds alias expansion (a "billion laughs" front matter).
    data = parseYaml(lines.slice(1, end).join("\n"), { maxAliasCount: 100 });
  } catch (error) {
    return {
      ok: false,
      reason: `SKILL.md front matter is not valid YAML: ${(error as Error).message.split("\n")[0]}`,
    };
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    return { ok: false, reason: "SKILL.md front matter is not a YAML mapping" };
  }
  const metadata = data as Record<string, unknown>;
  const name = scalarText(metadata.name);
  const description = scalarText(metadata.description);
  if (!name) return { ok: false, reason: "SKILL.md front matter has no name" };
  if (!description) return { ok: false, reason: "SKILL.md front matter has no description" };
  return { ok: true, skill: { name, description, metadata, body: lines.slice(end + 1).join("\n") } };
}

function scalarText(value: unknown): string | null {
  if (typeof value === "string") return value.trim() || null;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return null;
}

/**
 * Refuses, with a 400 naming the field, a front-matter name or description that Postgres cannot store (NUL,
 * lone surrogate: YAML's `"\0"` and `"\ud800"` escapes make them) or that is over the bound. Checked at
 * install only: the skill's name reaches the index, API answers and audit rows, and such a skill could then
 * only be removed by its folder. A folder already in a workspace is listed as it is.
 */
export function assertInstallableSkillFields(skill: { name: string; description: string }): void {
  assertNoUnsafeStrings({ name: skill.name, description: skill.description });
  for (const [field, value, max] of [
    ["name", skill.name, SKILL_NAME_MAX_CHARS],
    ["description", skill.description, SKILL_DESCRIPTION_MAX_CHARS],
  ] as const) {
    if (value.length <= max) continue;
    throw new AppError("BAD_REQUEST", `SKILL.md ${field} is ${value.length} characters`, {
      userMessage: `${field}: must be at most ${max} characters (SKILL.md front matter)`,
      details: { field, maxLength: max },
    });
  }
}
