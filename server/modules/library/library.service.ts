import type { Readable } from "node:stream";
import type { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { editAgentDefaults } from "@/server/modules/agent/agent.data";
import { audited } from "@/server/modules/audit/audited";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { assertMayDeclareStdioMcp } from "@/server/modules/tenant/tenant-policy";
import type { WorkspaceContentService } from "@/server/modules/workspace-content/workspace-content.service";
import { AppError } from "@/server/shared/errors";
import { createOnce, scopedCreateKey } from "@/server/shared/idempotency";
import { parseInput } from "@/server/shared/parse-input";
import type { ArchiveFormat } from "@/server/workspace/archive/archive-entries";
import { type TMcpDeclaration, ZMcpDeclaration } from "@/server/workspace/mcp/types";
import { type SeedSkill, ZSeedSkill } from "@/server/workspace/skills/agent-seed";
import {
  createLibraryEntry,
  findLibraryEntryByCreateKey,
  deleteLibraryEntry,
  getLibraryEntry,
  libraryUsage,
  listLibraryEntries,
  updateLibraryEntry,
} from "./library.data";
import { importSkillArchive, inlineSkillTar } from "./library-skill-archive";
import {
  type LibraryEntryDetail,
  type LibraryEntryRecord,
  type LibraryEntryView,
  type LibraryKind,
  type LibraryUsage,
  type TLibraryCreateRequest,
  type TLibraryUpdateRequest,
  ZLibraryCreateRequest,
  ZLibraryListRequest,
  ZLibraryUpdateRequest,
} from "./library.types";
import type { Db } from "@/server/db";

/**
 * The tenant library's use cases. Reads need `library:read` (viewers and up), changes `library:manage`
 * (admins); equipping an agent also needs `agent:manage`, installing into a workspace what adding an MCP or
 * skill there needs (members, on their own sessions' workspaces). A stdio MCP entry is held to the tenant's
 * stdio policy whenever it is saved, equipped or installed: it is a command Berth will run.
 */
const skillOf = (entry: LibraryEntryRecord): SeedSkill | null =>
  entry.kind === "SKILL" ? (entry.content as SeedSkill) : null;
const declarationOf = (entry: LibraryEntryRecord): TMcpDeclaration | null =>
  entry.kind === "MCP" ? (entry.content as TMcpDeclaration) : null;

function toView(entry: LibraryEntryRecord, usedBy: LibraryUsage[]): LibraryEntryView {
  const skill = skillOf(entry);
  return {
    id: entry.id,
    kind: entry.kind,
    name: entry.name,
    description: entry.description,
    declaration: declarationOf(entry),
    skill: skill && {
      description: skill.description,
      instructionsBytes: Buffer.byteLength(skill.instructions),
      files: skill.files.map((file) => ({ path: file.path, bytes: Buffer.byteLength(file.content) })),
    },
    usedBy,
    createdByUserId: entry.createdByUserId,
    createdAt: entry.createdAt,
    updatedAt: entry.updatedAt,
  };
}

async function assertStdioAllowed(
  scope: TenantScope,
  declaration: TMcpDeclaration | null,
  db: Db,
): Promise<void> {
  if (declaration?.mcp_config.type === "stdio_mcp") await assertMayDeclareStdioMcp(scope, db);
}

function wrongKind(entry: LibraryEntryRecord, wanted: LibraryKind): AppError {
  const what = wanted === "MCP" ? "an MCP server" : "a skill";
  return new AppError("BAD_REQUEST", `library entry ${entry.id} is ${entry.kind}, not ${wanted}`, {
    userMessage: `"${entry.name}" is not ${what}.`,
  });
}

export async function listLibrary(scope: TenantScope, raw: z.input<typeof ZLibraryListRequest> = {}, db: Db) {
  assertCan(scope, "library:read");
  const input = parseInput(ZLibraryListRequest, raw);
  const page = await listLibraryEntries(scope, input, db);
  const usage = await libraryUsage(
    scope,
    page.items.map((entry) => entry.id),
    db,
  );
  return { ...page, items: page.items.map((entry) => toView(entry, usage.get(entry.id) ?? [])) };
}

export async function getLibraryEntryDetail(
  scope: TenantScope,
  entryId: string,
  db: Db,
): Promise<LibraryEntryDetail> {
  assertCan(scope, "library:read");
  const entry = await getLibraryEntry(scope, entryId, db);
  const usage = await libraryUsage(scope, [entry.id], db);
  return { ...toView(entry, usage.get(entry.id) ?? []), skillContent: skillOf(entry) };
}

export async function addLibraryEntry(
  scope: TenantScope,
  raw: TLibraryCreateRequest,
  /** Where the change is audited (the root's `berth.audit`). */
  audit: AuditRecorder,
  db: Db,
): Promise<LibraryEntryView> {
  assertCan(scope, "library:manage");
  const input = parseInput(ZLibraryCreateRequest, raw);
  const content = input.kind === "MCP" ? input.declaration : input.skill;
  if (input.kind === "MCP") await assertStdioAllowed(scope, input.declaration, db);
  const description =
    input.kind === "SKILL" ? (input.description ?? input.skill.description) : input.description;
  // A key seen before answers with its entry, adding (and auditing) nothing.
  return createOnce(input.idempotencyKey ? scopedCreateKey(scope, input.idempotencyKey) : null, {
    earlier: async (createKey) => {
      const first = await findLibraryEntryByCreateKey(scope, createKey, db);
      if (!first) return null;
      const usage = await libraryUsage(scope, [first.id], db);
      return { result: toView(first, usage.get(first.id) ?? []), createdAt: first.createdAt };
    },
    create: (createKey) =>
      audited(
        audit,
        scope,
        {
          action: "library.create",
          targetType: "library",
          targetId: null,
          details: { kind: input.kind, name: content.name },
        },
        async () =>
          toView(
            await createLibraryEntry(
              scope,
              {
                kind: input.kind,
                name: content.name,
                description,
                content,
                createKey,
              },
              db,
            ),
            [],
          ),
        undefined,
        (entry) => ({ targetId: entry.id }),
      ),
  });
}

/** An uploaded skill (folder re-packed as tar, or an archive) into the library, as an inline skill. */
export async function addLibrarySkillArchive(
  scope: TenantScope,
  upload: { stream: Readable; format: ArchiveFormat; description?: string; idempotencyKey?: string },
  /** Where the change is audited (the root's `berth.audit`). */
  audit: AuditRecorder,
  db: Db,
): Promise<LibraryEntryView> {
  assertCan(scope, "library:manage");
  const skill = await importSkillArchive(upload.stream, upload.format);
  return addLibraryEntry(
    scope,
    {
      kind: "SKILL",
      skill,
      ...(upload.description ? { description: upload.description } : {}),
      ...(upload.idempotencyKey ? { idempotencyKey: upload.idempotencyKey } : {}),
    },
    audit,
    db,
  );
}

export async function changeLibraryEntry(
  scope: TenantScope,
  entryId: string,
  raw: TLibraryUpdateRequest,
  /** Where the change is audited (the root's `berth.audit`). */
  audit: AuditRecorder,
  db: Db,
): Promise<LibraryEntryView> {
  assertCan(scope, "library:manage");
  const patch = parseInput(ZLibraryUpdateRequest, raw);
  const current = await getLibraryEntry(scope, entryId, db);
  if (patch.declaration && current.kind !== "MCP") throw wrongKind(current, "MCP");
  if (patch.skill && current.kind !== "SKILL") throw wrongKind(current, "SKILL");
  const content = patch.declaration ?? patch.skill;
  if (patch.declaration) await assertStdioAllowed(scope, patch.declaration, db);
  return audited(
    audit,
    scope,
    {
      action: "library.update",
      targetType: "library",
      targetId: entryId,
      details: { fields: Object.keys(patch), name: content?.name ?? current.name },
    },
    async () => {
      const entry = await updateLibraryEntry(
        scope,
        entryId,
        {
          ...(patch.description !== undefined ? { description: patch.description } : {}),
          ...(content ? { content, name: content.name } : {}),
        },
        db,
      );
      const usage = await libraryUsage(scope, [entry.id], db);
      return toView(entry, usage.get(entry.id) ?? []);
    },
  );
}

/** Deletes the entry; agents' defaults copied from it stay as they are (they are copies, not links). */
export async function removeLibraryEntry(
  scope: TenantScope,
  entryId: string,
  /** Where the change is audited (the root's `berth.audit`). */
  audit: AuditRecorder,
  db: Db,
): Promise<{ deleted: true }> {
  assertCan(scope, "library:manage");
  return audited(
    audit,
    scope,
    { action: "library.delete", targetType: "library", targetId: entryId },
    async () => {
      await deleteLibraryEntry(scope, entryId, db);
      return { deleted: true as const };
    },
  );
}

/**
 * "Equip": puts the entry into the agent's defaults (an MCP into `defaultMcpConfigs`, a skill into
 * `defaultSkills`), replacing a default of the same name, so the agent's workspaces start with it from their
 * next use. Under the agent's row lock (editAgentDefaults), so a concurrent edit of the agent is kept.
 */
export async function equipAgentFromLibrary(
  scope: TenantScope,
  input: { entryId: string; agentId: string },
  /** Where the change is audited (the root's `berth.audit`). */
  audit: AuditRecorder,
  db: Db,
): Promise<{ agentId: string; name: string; outcome: "added" | "replaced" | "unchanged" }> {
  assertCan(scope, "agent:manage");
  const entry = await getLibraryEntry(scope, input.entryId, db);
  await assertStdioAllowed(scope, declarationOf(entry), db);
  let outcome: "added" | "replaced" | "unchanged" = "added";
  const upsert = <T extends { name: string }>(list: T[], item: T): T[] => {
    const index = list.findIndex((existing) => existing.name === item.name);
    if (index === -1) return [...list, item];
    outcome = "replaced";
    return list.map((existing, at) => (at === index ? item : existing));
  };
  return audited(
    audit,
    scope,
    {
      action: "library.equip",
      targetType: "agent",
      targetId: input.agentId,
      details: { entryId: entry.id, kind: entry.kind, name: entry.name },
    },
    async () => {
      const { changed } = await editAgentDefaults(
        scope,
        input.agentId,
        (current) => {
          const declaration = declarationOf(entry);
          const skill = skillOf(entry);
          return {
            defaultMcpConfigs: declaration
              ? upsert(current.defaultMcpConfigs, declaration)
              : current.defaultMcpConfigs,
            defaultSkills: skill ? upsert(current.defaultSkills, skill) : current.defaultSkills,
          };
        },
        db,
      );
      return { agentId: input.agentId, name: entry.name, outcome: changed ? outcome : "unchanged" };
    },
    undefined,
    (result) => ({ details: { outcome: result.outcome } }),
  );
}

type InstallPort = Pick<WorkspaceContentService, "addMcp" | "installSkillArchive">;

/**
 * "Install into a workspace": an MCP entry into one MCP scope (agent, session; "" is the shared scope), a
 * skill entry into one skill partition (the agent's, or the default one). The workspace content service
 * does the rest as for any add or upload: access to the workspace, the stdio policy, the engine's checks,
 * the audit entry.
 */
export async function installMcpFromLibrary(
  scope: TenantScope,
  input: { entryId: string; workspaceId: string; agentId: string; sessionId: string },
  content: InstallPort,
  db: Db,
): Promise<{ name: string }> {
  assertCan(scope, "library:read");
  const entry = await getLibraryEntry(scope, input.entryId, db);
  const declaration = declarationOf(entry);
  if (!declaration) throw wrongKind(entry, "MCP");
  return content.addMcp(
    scope,
    input.workspaceId,
    { agentId: input.agentId, sessionId: input.sessionId },
    ZMcpDeclaration.parse(declaration),
  );
}

export async function installSkillFromLibrary(
  scope: TenantScope,
  input: { entryId: string; workspaceId: string; agentId: string | null },
  content: InstallPort,
  db: Db,
): Promise<{ name: string; dir: string; deduplicated: boolean }> {
  assertCan(scope, "library:read");
  const entry = await getLibraryEntry(scope, input.entryId, db);
  const skill = skillOf(entry);
  if (!skill) throw wrongKind(entry, "SKILL");
  const { stream, format } = inlineSkillTar(ZSeedSkill.parse(skill));
  return content.installSkillArchive(scope, input.workspaceId, { agentId: input.agentId, stream, format });
}
