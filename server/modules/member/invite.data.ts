import { randomUUID } from "node:crypto";
import type { Prisma } from "@/generated/prisma/client";
import type { GateTenantStatus } from "@/server/auth/gate.data";
import type { TenantRole } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import { type Db, type DbClient, isUniqueViolation } from "@/server/db";
import type { InviteDTO, InvitePreview } from "@/server/modules/member/invite.types";
import { createKeyTaken } from "@/server/shared/idempotency";
import { currentRequestMeta } from "@/server/shared/request-meta";

const inviteSelect = {
  id: true,
  role: true,
  note: true,
  createdAt: true,
  expiresAt: true,
  createdById: true,
  acceptedAt: true,
  acceptedById: true,
  revokedAt: true,
} satisfies Prisma.InviteLinkSelect;
type InviteRow = Prisma.InviteLinkGetPayload<{ select: typeof inviteSelect }>;

function stateOf(row: InviteRow, now: Date): InviteDTO["state"] {
  if (row.acceptedAt) return "accepted";
  if (row.revokedAt) return "revoked";
  return row.expiresAt <= now ? "expired" : "pending";
}

async function toDTOs(rows: InviteRow[], db: DbClient): Promise<InviteDTO[]> {
  const userIds = [...new Set(rows.flatMap((row) => [row.createdById, row.acceptedById ?? []].flat()))];
  const users = await db.user.findMany({ where: { id: { in: userIds } }, select: { id: true, email: true } });
  const emails = new Map(users.map((user) => [user.id, user.email]));
  const now = new Date();
  return rows.map((row) => ({
    id: row.id,
    role: row.role,
    note: row.note,
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
    createdByEmail: emails.get(row.createdById) ?? null,
    acceptedAt: row.acceptedAt,
    acceptedByEmail: row.acceptedById ? (emails.get(row.acceptedById) ?? null) : null,
    revokedAt: row.revokedAt,
    state: stateOf(row, now),
  }));
}

export async function insertInvite(
  scope: TenantScope,
  input: {
    tokenHash: string;
    role: TenantRole;
    note: string;
    createdById: string;
    expiresAt: Date;
    /** `scopedCreateKey` of the request's idempotency key (unique per tenant). */
    createKey?: string | null;
  },
  db: DbClient,
): Promise<InviteDTO> {
  const row = await db.inviteLink
    .create({ data: { tenantId: scope.tenantId, ...input }, select: inviteSelect })
    .catch((error: unknown) => {
      // A concurrent create with the same key won: the service answers with its invitation. A keyed
      // token is derived from the key, so the twin may hit the token's unique hash before the key's.
      const twin =
        input.createKey && (isUniqueViolation(error, "create_key") || isUniqueViolation(error, "token_hash"));
      throw twin ? createKeyTaken() : error;
    });
  const [dto] = await toDTOs([row], db);
  return dto!;
}

/** The invitation a create with this `createKey` made, with its token's hash (to check a re-derived link). */
export async function findInviteByCreateKey(
  scope: TenantScope,
  createKey: string,
  db: DbClient,
): Promise<{ invite: InviteDTO; tokenHash: string } | null> {
  const row = await db.inviteLink.findUnique({
    where: { tenantId_createKey: { tenantId: scope.tenantId, createKey } },
    select: { ...inviteSelect, tokenHash: true },
  });
  if (!row) return null;
  const [invite] = await toDTOs([row], db);
  return { invite: invite!, tokenHash: row.tokenHash };
}

/** The tenant's invitations, newest first (the last 100: pending ones and recent history). */
export async function listInvites(scope: TenantScope, db: DbClient): Promise<InviteDTO[]> {
  const rows = await db.inviteLink.findMany({
    where: { tenantId: scope.tenantId },
    select: inviteSelect,
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: 100,
  });
  return toDTOs(rows, db);
}

/** Revokes a pending invitation; false when there is none with that id (or it is no longer pending). */
export async function revokeInvite(scope: TenantScope, id: string, db: DbClient): Promise<boolean> {
  const { count } = await db.inviteLink.updateMany({
    where: { id, tenantId: scope.tenantId, acceptedAt: null, revokedAt: null },
    data: { revokedAt: new Date() },
  });
  return count === 1;
}

/**
 * A pending, unexpired invitation by its token's hash, with its tenant's name and status (the caller refuses
 * a suspended tenant's). Not tenant-scoped: the token is the credential.
 */
export async function findPendingInvite(
  tokenHash: string,
  db: DbClient,
): Promise<(InvitePreview & { id: string; tenantId: string; tenantStatus: GateTenantStatus }) | null> {
  const row = await db.inviteLink.findFirst({
    where: { tokenHash, acceptedAt: null, revokedAt: null, expiresAt: { gt: new Date() } },
    select: {
      id: true,
      tenantId: true,
      role: true,
      expiresAt: true,
      tenant: { select: { name: true, slug: true, status: true } },
    },
  });
  return row
    ? {
        id: row.id,
        tenantId: row.tenantId,
        role: row.role,
        expiresAt: row.expiresAt,
        tenantName: row.tenant.name,
        tenantStatus: row.tenant.status,
      }
    : null;
}

export type AcceptOutcome =
  | { kind: "accepted"; userId: string; tenantSlug: string }
  | { kind: "gone" }
  | { kind: "email-taken" }
  | { kind: "tenant-inactive"; status: GateTenantStatus };

/**
 * In one transaction: checks the tenant is still active (an operator may have suspended it since the
 * caller's read; the invitation then stays pending), claims the invitation (only if still pending: two
 * people racing for one link, one wins), creates the user with a better-auth credential (`passwordHash`
 * from its hasher, so sign-in accepts it) and the membership with the invited role.
 */
export async function acceptInviteAsNewUser(
  input: {
    inviteId: string;
    tenantId: string;
    role: TenantRole;
    name: string;
    email: string;
    passwordHash: string;
  },
  db: Db,
): Promise<AcceptOutcome> {
  const userId = randomUUID();
  return db
    .$transaction(async (tx) => {
      const tenant = await tx.tenant.findUnique({ where: { id: input.tenantId }, select: { status: true } });
      if (!tenant) return { kind: "gone" } as const;
      if (tenant.status !== "active") return { kind: "tenant-inactive", status: tenant.status } as const;
      const taken = await tx.user.findFirst({ where: { email: input.email }, select: { id: true } });
      if (taken) return { kind: "email-taken" } as const;
      const claimed = await tx.inviteLink.updateMany({
        where: { id: input.inviteId, acceptedAt: null, revokedAt: null, expiresAt: { gt: new Date() } },
        data: { acceptedAt: new Date(), acceptedById: userId },
      });
      if (claimed.count !== 1) return { kind: "gone" } as const;
      await tx.user.create({
        data: {
          id: userId,
          email: input.email,
          name: input.name,
          emailVerified: false,
          authAccounts: {
            create: { providerId: "credential", accountId: userId, password: input.passwordHash },
          },
        },
      });
      const membership = await tx.membership.create({
        data: { tenantId: input.tenantId, userId, role: input.role },
        select: { tenant: { select: { slug: true } } },
      });
      // In the same transaction: the new member is the actor (no scope can be minted here).
      await tx.auditLog.create({
        data: {
          tenantId: input.tenantId,
          actorType: "user",
          actorId: userId,
          action: "member.invite-accept",
          targetType: "invitation",
          targetId: input.inviteId,
          outcome: "success",
          // Written here, not by the audit module: the caller's address and user agent come the same way.
          ip: currentRequestMeta()?.ip ?? null,
          userAgent: currentRequestMeta()?.userAgent ?? null,
          details: { role: input.role },
        },
        select: { id: true },
      });
      return { kind: "accepted", userId, tenantSlug: membership.tenant.slug } as const;
    })
    .catch((error: unknown) => {
      if (isUniqueViolation(error)) return { kind: "email-taken" } as const;
      throw error;
    });
}
