import type { Prisma } from "@/generated/prisma/client";
import type { TenantScope } from "@/server/auth/scope";
import { type DbClient, getDb, isUniqueViolation, pageSize } from "@/server/db";
import { AppError } from "@/server/shared/errors";
import { type Page, pageArgs, paginate } from "@/server/shared/page";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import { ZSeedSkill } from "@/server/workspace/skills/agent-seed";
import type { LibraryEntryRecord, LibraryKind, LibraryUsage } from "./library.types";

// Every query filters on the scope's tenant: an entry id of another tenant reads as "not found".
const entrySelect = {
  id: true,
  kind: true,
  name: true,
  description: true,
  content: true,
  createdByUserId: true,
  createdAt: true,
  updatedAt: true,
} satisfies Prisma.LibraryEntrySelect;

type EntryRow = Prisma.LibraryEntryGetPayload<{ select: typeof entrySelect }>;

/** Stored content is parsed by kind on the way out, so callers get the engine's shapes or nothing. */
function toRecord(row: EntryRow): LibraryEntryRecord {
  const schema = row.kind === "MCP" ? ZMcpDeclaration : ZSeedSkill;
  const parsed = schema.safeParse(row.content);
  if (!parsed.success) {
    throw new AppError("INTERNAL", `library entry ${row.id} holds content its kind does not parse`);
  }
  return { ...row, content: parsed.data };
}

function libraryEntryNotFound(entryId: string): AppError {
  return new AppError("NOT_FOUND", `library entry ${entryId} not found`, {
    userMessage: "Library entry not found.",
  });
}

function mapNameConflict(error: unknown, kind: LibraryKind, name: string): unknown {
  if (!isUniqueViolation(error)) return error;
  const what = kind === "MCP" ? "An MCP server" : "A skill";
  return new AppError("CONFLICT", `library ${kind} ${name} exists`, {
    cause: error,
    userMessage: `${what} named "${name}" is already in the library.`,
  });
}

export async function createLibraryEntry(
  scope: TenantScope,
  input: {
    kind: LibraryKind;
    name: string;
    description: string;
    content: Prisma.InputJsonValue;
    /** `scopedCreateKey` of the request's idempotency key (unique per tenant). */
    createKey?: string | null;
  },
  db: DbClient = getDb(),
): Promise<LibraryEntryRecord> {
  try {
    const row = await db.libraryEntry.create({
      data: { ...input, tenantId: scope.tenantId, createdByUserId: scope.userId },
      select: entrySelect,
    });
    return toRecord(row);
  } catch (error) {
    throw mapNameConflict(error, input.kind, input.name);
  }
}

/** The entry a create with this `createKey` made (see `scopedCreateKey`); null when there is none. */
export async function findLibraryEntryByCreateKey(
  scope: TenantScope,
  createKey: string,
  db: DbClient = getDb(),
): Promise<LibraryEntryRecord | null> {
  const row = await db.libraryEntry.findUnique({
    where: { tenantId_createKey: { tenantId: scope.tenantId, createKey } },
    select: entrySelect,
  });
  return row ? toRecord(row) : null;
}

export async function getLibraryEntry(
  scope: TenantScope,
  entryId: string,
  db: DbClient = getDb(),
): Promise<LibraryEntryRecord> {
  const row = await db.libraryEntry.findFirst({
    where: { tenantId: scope.tenantId, id: entryId },
    select: entrySelect,
  });
  if (!row) throw libraryEntryNotFound(entryId);
  return toRecord(row);
}

/** Newest first, optionally one kind. */
export async function listLibraryEntries(
  scope: TenantScope,
  options: { kind?: LibraryKind; limit?: number; cursor?: string } = {},
  db: DbClient = getDb(),
): Promise<Page<LibraryEntryRecord>> {
  const take = pageSize(options.limit);
  const rows = await db.libraryEntry.findMany({
    where: { tenantId: scope.tenantId, ...(options.kind ? { kind: options.kind } : {}) },
    select: entrySelect,
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    ...pageArgs(take, options.cursor),
  });
  return paginate(rows, take, toRecord);
}

/** Replaces the given fields (the caller validated the content against the entry's kind). */
export async function updateLibraryEntry(
  scope: TenantScope,
  entryId: string,
  patch: { name?: string; description?: string; content?: Prisma.InputJsonValue },
  db: DbClient = getDb(),
): Promise<LibraryEntryRecord> {
  const current = await getLibraryEntry(scope, entryId, db);
  try {
    const { count } = await db.libraryEntry.updateMany({
      where: { tenantId: scope.tenantId, id: entryId },
      data: patch,
    });
    if (count === 0) throw libraryEntryNotFound(entryId);
  } catch (error) {
    throw mapNameConflict(error, current.kind, patch.name ?? current.name);
  }
  return getLibraryEntry(scope, entryId, db);
}

export async function deleteLibraryEntry(
  scope: TenantScope,
  entryId: string,
  db: DbClient = getDb(),
): Promise<void> {
  const { count } = await db.libraryEntry.deleteMany({ where: { tenantId: scope.tenantId, id: entryId } });
  if (count === 0) throw libraryEntryNotFound(entryId);
}

/**
 * Which agents of the tenant name each entry in their defaults (an MCP entry in `defaultMcpConfigs`, a skill
 * in `defaultSkills`), by name, and whether their copy is the library's (jsonb equality, which ignores key
 * order). One query for a page of entries, in Postgres, so no agent's default list is loaded into memory.
 */
export async function libraryUsage(
  scope: TenantScope,
  entryIds: readonly string[],
  db: DbClient = getDb(),
): Promise<Map<string, LibraryUsage[]>> {
  const usage = new Map<string, LibraryUsage[]>();
  if (entryIds.length === 0) return usage;
  const rows = await db.$queryRaw<
    { entryId: string; agentId: string; agentName: string; identical: boolean }[]
  >`
    SELECT l.id AS "entryId", a.id AS "agentId", a.name AS "agentName", (e.value = l.content) AS identical
    FROM library_entries l
    JOIN agents a ON a.tenant_id = l.tenant_id
    CROSS JOIN LATERAL (
      SELECT CASE WHEN l.kind = 'MCP' THEN a.default_mcp_configs ELSE a.default_skills END AS list
    ) d
    CROSS JOIN LATERAL jsonb_array_elements(
      CASE WHEN jsonb_typeof(d.list) = 'array' THEN d.list ELSE '[]'::jsonb END
    ) AS e(value)
    WHERE l.tenant_id = ${scope.tenantId} AND l.id = ANY(${[...entryIds]}) AND e.value->>'name' = l.name
    ORDER BY a.name, a.id`;
  for (const row of rows) {
    const list = usage.get(row.entryId) ?? [];
    list.push({ agentId: row.agentId, agentName: row.agentName, identical: row.identical });
    usage.set(row.entryId, list);
  }
  return usage;
}
