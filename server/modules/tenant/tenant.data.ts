import { randomUUID } from "node:crypto";
import type { Prisma } from "@/generated/prisma/client";
import { type DbClient, isUniqueViolation } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import type { TenantCountsDTO, TenantDTO } from "@/server/modules/tenant/tenant.types";

const tenantSelect = { id: true, name: true, slug: true, createdAt: true } satisfies Prisma.TenantSelect;

export async function getTenant(scope: TenantScope, db: DbClient): Promise<TenantDTO> {
  const tenant = await db.tenant.findFirst({ where: { id: scope.tenantId }, select: tenantSelect });
  if (!tenant)
    throw new AppError("NOT_FOUND", `tenant ${scope.tenantId} not found`, {
      userMessage: "Tenant not found.",
    });
  return tenant;
}

export async function getTenantCounts(scope: TenantScope, db: DbClient): Promise<TenantCountsDTO> {
  const tenantId = scope.tenantId;
  const [agents, sessions, workspaces, activeWorkspaces, members, apiKeys] = await Promise.all([
    db.agent.count({ where: { tenantId } }),
    db.session.count({ where: { tenantId } }),
    db.workspace.count({ where: { tenantId } }),
    db.workspace.count({ where: { tenantId, state: { notIn: ["STOPPED", "PURGED", "FAILED"] } } }),
    db.membership.count({ where: { tenantId } }),
    db.apiKey.count({ where: { tenantId, revokedAt: null } }),
  ]);
  return { agents, sessions, workspaces, activeWorkspaces, members, apiKeys };
}

export async function updateTenantName(scope: TenantScope, name: string, db: DbClient): Promise<TenantDTO> {
  await db.tenant.updateMany({ where: { id: scope.tenantId }, data: { name } });
  return getTenant(scope, db);
}

// ------------------------------------------------------------------------------------------------
// Pre-scope functions: creating a tenant happens before any scope for it can exist.

/** The tenants a user belongs to (for the tenant switcher and the post-sign-in redirect). */
export async function listTenantsOfUser(
  userId: string,
  db: DbClient,
): Promise<
  (TenantDTO & {
    role: "owner" | "admin" | "member" | "viewer";
    /** An operator's suspension (prisma/operator.prisma): the dashboard says so instead of failing calls. */
    status: "active" | "suspended" | "deleting";
  })[]
> {
  const rows = await db.membership.findMany({
    where: { userId },
    select: { role: true, tenant: { select: { ...tenantSelect, status: true } } },
    orderBy: { createdAt: "asc" },
  });
  return rows.map((r) => ({ ...r.tenant, role: r.role }));
}

export async function findTenantBySlug(slug: string, db: DbClient): Promise<TenantDTO | null> {
  return db.tenant.findFirst({ where: { slug }, select: tenantSelect });
}

export async function findUserByEmail(
  email: string,
  db: DbClient,
): Promise<{ id: string; email: string; name: string } | null> {
  return db.user.findFirst({ where: { email }, select: { id: true, email: true, name: true } });
}

/**
 * Creates a tenant and makes `owner` its owner, creating the user with an email/password
 * credential when they do not exist yet. Runs in one transaction. `passwordHash` must come from
 * better-auth's hasher so that sign-in accepts it. Returns null when the slug or email was taken
 * concurrently (the caller re-reads).
 */
export async function insertTenantWithOwner(
  input: {
    tenantName: string;
    slug: string;
    owner: { email: string; name: string; passwordHash: string } | { userId: string };
  },
  db: DbClient,
): Promise<{ tenant: TenantDTO; owner: { id: string; email: string; name: string } } | null> {
  const newUserId = randomUUID();
  return db
    .$transaction(async (tx) => {
      const owner =
        "userId" in input.owner
          ? await tx.user.findFirstOrThrow({
              where: { id: input.owner.userId },
              select: { id: true, email: true, name: true },
            })
          : await tx.user.create({
              data: {
                id: newUserId,
                email: input.owner.email,
                name: input.owner.name,
                emailVerified: false,
                // better-auth's credential account: accountId is the user id, providerId "credential".
                authAccounts: {
                  create: {
                    providerId: "credential",
                    accountId: newUserId,
                    password: input.owner.passwordHash,
                  },
                },
              },
              select: { id: true, email: true, name: true },
            });
      const tenant = await tx.tenant.create({
        data: {
          name: input.tenantName,
          slug: input.slug,
          memberships: { create: { userId: owner.id, role: "owner" } },
        },
        select: tenantSelect,
      });
      return { tenant, owner };
    })
    .catch((error: unknown) => {
      if (isUniqueViolation(error)) return null;
      throw error;
    });
}
