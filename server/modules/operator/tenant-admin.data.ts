import { z } from "zod";
import type { Prisma } from "@/generated/prisma/client";
import type { DbClient } from "@/server/db";
import type { OperatorTenantView, TenantStatus } from "@/server/modules/operator/operator.types";

/**
 * Tenants as operators see them: every tenant, its status and usage. Not tenant-scoped (an operator acts
 * above tenants); only the operator services call these, after checking their caller is an operator.
 */

const tenantSelect = {
  id: true,
  name: true,
  slug: true,
  status: true,
  statusChangedAt: true,
  createdAt: true,
} satisfies Prisma.TenantSelect;
type TenantRow = Prisma.TenantGetPayload<{ select: typeof tenantSelect }>;

/** Workspaces that hold a machine (or may be about to): what "live" counts and what suspension stops. */
const LIVE_STATES = ["PROVISIONING", "READY", "STOPPING"] as const;

const ZUsageRow = z.object({
  tenant_id: z.string(),
  members: z.coerce.number(),
  agents: z.coerce.number(),
  sessions: z.coerce.number(),
  workspaces_live: z.coerce.number(),
  workspaces_total: z.coerce.number(),
});

async function usageOf(ids: string[], db: DbClient): Promise<Map<string, OperatorTenantView["usage"]>> {
  if (ids.length === 0) return new Map();
  // One statement for the whole page: per-tenant counts as correlated subqueries over tenant-leading indexes.
  const rows = await db.$queryRaw<unknown[]>`
    SELECT t.id AS tenant_id,
           (SELECT count(*) FROM memberships m WHERE m.tenant_id = t.id) AS members,
           (SELECT count(*) FROM agents a WHERE a.tenant_id = t.id) AS agents,
           (SELECT count(*) FROM sessions s WHERE s.tenant_id = t.id) AS sessions,
           (SELECT count(*) FROM workspaces w WHERE w.tenant_id = t.id
              AND w.state::text IN ('PROVISIONING', 'READY', 'STOPPING')) AS workspaces_live,
           (SELECT count(*) FROM workspaces w WHERE w.tenant_id = t.id) AS workspaces_total
      FROM tenants t WHERE t.id = ANY(${ids})`;
  return new Map(
    rows.map((raw) => {
      const row = ZUsageRow.parse(raw);
      return [
        row.tenant_id,
        {
          members: row.members,
          agents: row.agents,
          sessions: row.sessions,
          workspacesLive: row.workspaces_live,
          workspacesTotal: row.workspaces_total,
        },
      ];
    }),
  );
}

const EMPTY_USAGE = { members: 0, agents: 0, sessions: 0, workspacesLive: 0, workspacesTotal: 0 };

async function withUsage(rows: TenantRow[], db: DbClient): Promise<OperatorTenantView[]> {
  const usage = await usageOf(
    rows.map((row) => row.id),
    db,
  );
  return rows.map((row) => ({ ...row, usage: usage.get(row.id) ?? EMPTY_USAGE }));
}

export async function listTenantsWithUsage(db: DbClient): Promise<OperatorTenantView[]> {
  const rows = await db.tenant.findMany({ select: tenantSelect, orderBy: { createdAt: "asc" }, take: 1000 });
  return withUsage(rows, db);
}

/** A tenant by id or slug, with its usage; null when there is none. */
export async function findTenantWithUsage(
  tenantIdOrSlug: string,
  db: DbClient,
): Promise<OperatorTenantView | null> {
  const row = await db.tenant.findFirst({
    where: { OR: [{ id: tenantIdOrSlug }, { slug: tenantIdOrSlug }] },
    select: tenantSelect,
  });
  return row ? ((await withUsage([row], db))[0] ?? null) : null;
}

export async function listTenantOwners(tenantId: string, db: DbClient) {
  const rows = await db.membership.findMany({
    where: { tenantId, role: "owner" },
    select: { user: { select: { id: true, email: true, name: true } } },
    orderBy: { createdAt: "asc" },
  });
  return rows.map((row) => ({ userId: row.user.id, email: row.user.email, name: row.user.name }));
}

/** The tenant's owner invitations (the ones operators make), newest first. */
export async function listOwnerInvites(tenantId: string, db: DbClient) {
  const rows = await db.inviteLink.findMany({
    where: { tenantId, role: "owner" },
    select: { id: true, expiresAt: true, acceptedAt: true, acceptedById: true, revokedAt: true },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: 20,
  });
  const acceptedIds = rows.flatMap((row) => (row.acceptedById ? [row.acceptedById] : []));
  const users = await db.user.findMany({
    where: { id: { in: acceptedIds } },
    select: { id: true, email: true },
  });
  const emails = new Map(users.map((user) => [user.id, user.email]));
  const now = new Date();
  return rows.map((row) => ({
    id: row.id,
    expiresAt: row.expiresAt,
    acceptedByEmail: row.acceptedById ? (emails.get(row.acceptedById) ?? null) : null,
    state: row.acceptedAt
      ? ("accepted" as const)
      : row.revokedAt
        ? ("revoked" as const)
        : row.expiresAt <= now
          ? ("expired" as const)
          : ("pending" as const),
  }));
}

/** Inserts an empty tenant (no member yet: its first owner comes by invitation); null when the slug is taken. */
export async function insertEmptyTenant(
  input: { name: string; slug: string; createKey?: string | null },
  db: DbClient,
): Promise<TenantRow | null> {
  // skipDuplicates: a taken slug or create key (a concurrent create with the same idempotency key) is null.
  const created = await db.tenant.createManyAndReturn({
    data: [{ name: input.name, slug: input.slug, createKey: input.createKey ?? null }],
    skipDuplicates: true,
    select: tenantSelect,
  });
  return created[0] ?? null;
}

/** The tenant an operator's create with this `createKey` made; null when there is none. */
export async function findTenantByCreateKey(
  createKey: string,
  db: DbClient,
): Promise<{ id: string; createdAt: Date } | null> {
  return db.tenant.findUnique({ where: { createKey }, select: { id: true, createdAt: true } });
}

/** Moves a tenant from one of `from` to `to`; false when it was in none of them (someone else moved it). */
export async function transitionTenantStatus(
  tenantId: string,
  from: TenantStatus[],
  to: TenantStatus,
  db: DbClient,
): Promise<boolean> {
  const { count } = await db.tenant.updateMany({
    where: { id: tenantId, status: { in: from } },
    data: { status: to, statusChangedAt: new Date() },
  });
  return count === 1;
}

/** Ids of the tenant's workspaces in the given states. */
export async function listTenantWorkspaceIds(
  tenantId: string,
  filter: { states?: readonly string[]; excludeStates?: readonly string[] },
  db: DbClient,
): Promise<string[]> {
  type State = Prisma.WorkspaceWhereInput["state"];
  const state: State = filter.states
    ? { in: filter.states as never }
    : filter.excludeStates
      ? { notIn: filter.excludeStates as never }
      : undefined;
  const rows = await db.workspace.findMany({
    where: { tenantId, ...(state ? { state } : {}) },
    select: { id: true },
    orderBy: { createdAt: "asc" },
  });
  return rows.map((row) => row.id);
}

export const liveWorkspaceStates = LIVE_STATES;
