import { parse as parseYaml } from "yaml";

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
