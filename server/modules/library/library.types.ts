import { z } from "zod";
import { ZIdempotencyKey } from "@/server/shared/idempotency";
import { ZPageOf } from "@/server/shared/page";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import { ZSeedSkill } from "@/server/workspace/skills/agent-seed";

/**
 * The tenant library (the reference's MCP library and skill hubs, agentscope-spec.md §9.4): vetted MCP
 * declarations and skills an admin keeps once, then equips agents' defaults and workspaces from. An entry
 * holds its content in the exact shape an agent's defaults hold it, so "equip" is a copy and "where is it
 * used" is a comparison (library.data.ts).
 */
const LIBRARY_KINDS = ["MCP", "SKILL"] as const;
const ZLibraryKind = z.enum(LIBRARY_KINDS);
export type LibraryKind = z.infer<typeof ZLibraryKind>;

const ZLibraryDescription = z.string().trim().max(2000);

/** A new entry: its name is the MCP's or the skill's own name (what defaults and workspaces know it by). */
export const ZLibraryCreateRequest = z.discriminatedUnion("kind", [
  z.object({
    kind: z.literal("MCP"),
    description: ZLibraryDescription.default(""),
    declaration: ZMcpDeclaration,
    idempotencyKey: ZIdempotencyKey.optional(),
  }),
  z.object({
    kind: z.literal("SKILL"),
    description: ZLibraryDescription.optional(),
    skill: ZSeedSkill,
    /** The same key from the same caller within 24 hours returns the first entry instead of adding again. */
    idempotencyKey: ZIdempotencyKey.optional(),
  }),
]);
export type TLibraryCreateRequest = z.input<typeof ZLibraryCreateRequest>;

/** Omitted fields keep their values; the content must be of the entry's kind (a new name renames it). */
export const ZLibraryUpdateRequest = z
  .object({
    description: ZLibraryDescription.optional(),
    declaration: ZMcpDeclaration.optional(),
    skill: ZSeedSkill.optional(),
  })
  .refine((patch) => patch.declaration === undefined || patch.skill === undefined, {
    message: "an entry is an MCP or a skill: give declaration or skill, not both",
    path: ["skill"],
  });
export type TLibraryUpdateRequest = z.input<typeof ZLibraryUpdateRequest>;

export const ZLibraryListRequest = z.object({
  kind: ZLibraryKind.optional(),
  limit: z.number().int().min(1).max(200).optional(),
  cursor: z.string().min(1).max(200).optional(),
});

/**
 * An agent whose defaults name the entry: `identical` when its default is the library's version byte for
 * byte (JSON-equal), false when it has the name but another content (edited on the agent, or an older
 * version of the entry): equipping again replaces it with the library's.
 */
const ZLibraryUsage = z.object({ agentId: z.string(), agentName: z.string(), identical: z.boolean() });
export type LibraryUsage = z.infer<typeof ZLibraryUsage>;

/** A skill as lists show it: what it says it is and its files' sizes, not their content. */
const ZLibrarySkillSummary = z.object({
  description: z.string(),
  instructionsBytes: z.number().int(),
  files: z.array(z.object({ path: z.string(), bytes: z.number().int() })),
});

export const ZLibraryEntryView = z.object({
  id: z.string(),
  kind: ZLibraryKind,
  name: z.string(),
  description: z.string(),
  /** MCP entries: the declaration (as agents' defaults and `.mcp` files hold it). */
  declaration: ZMcpDeclaration.nullable(),
  /** SKILL entries: a summary (`library.get` adds the full skill). */
  skill: ZLibrarySkillSummary.nullable(),
  usedBy: z.array(ZLibraryUsage),
  createdByUserId: z.string().nullable(),
  createdAt: z.date(),
  updatedAt: z.date(),
});
export type LibraryEntryView = z.infer<typeof ZLibraryEntryView>;
export const ZLibraryEntryPage = ZPageOf(ZLibraryEntryView);

/** `library.get`: the view plus the full skill (instructions and files) of a SKILL entry. */
export const ZLibraryEntryDetail = ZLibraryEntryView.extend({ skillContent: ZSeedSkill.nullable() });
export type LibraryEntryDetail = z.infer<typeof ZLibraryEntryDetail>;

/** The row as the data layer returns it (content parsed by kind). */
export type LibraryEntryRecord = {
  id: string;
  kind: LibraryKind;
  name: string;
  description: string;
  content: z.output<typeof ZMcpDeclaration> | z.output<typeof ZSeedSkill>;
  createdByUserId: string | null;
  createdAt: Date;
  updatedAt: Date;
};
