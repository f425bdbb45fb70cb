import type { Prisma } from "@/generated/prisma/client";
import type { DbClient } from "@/server/db";
import type { TenantRole } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import type { MemberDTO } from "@/server/modules/member/member.types";

const memberSelect = {
  role: true,
  createdAt: true,
  user: { select: { id: true, name: true, email: true } },
} satisfies Prisma.MembershipSelect;

type MemberRow = Prisma.MembershipGetPayload<{ select: typeof memberSelect }>;
const toMemberDTO = (row: MemberRow): MemberDTO => ({
  userId: row.user.id,
  name: row.user.name,
  email: row.user.email,
  role: row.role,
  joinedAt: row.createdAt,
});

export async function listMembers(scope: TenantScope, db: DbClient): Promise<MemberDTO[]> {
  const rows = await db.membership.findMany({
    where: { tenantId: scope.tenantId },
    select: memberSelect,
    orderBy: [{ createdAt: "asc" }, { id: "asc" }],
  });
  return rows.map(toMemberDTO);
}

export async function getMember(scope: TenantScope, userId: string, db: DbClient): Promise<MemberDTO> {
  const row = await db.membership.findFirst({
    where: { tenantId: scope.tenantId, userId },
    select: memberSelect,
  });
  if (!row) throw notFound(userId);
  return toMemberDTO(row);
}

/** Adds an existing user to the tenant. CONFLICT when they already are a member. */
export async function addMember(
  scope: TenantScope,
  input: { userId: string; role: TenantRole },
  db: DbClient,
): Promise<MemberDTO> {
  const existing = await db.membership.findFirst({
    where: { tenantId: scope.tenantId, userId: input.userId },
    select: { id: true },
  });
  if (existing)
    throw new AppError("CONFLICT", `user ${input.userId} is already a member`, {
      userMessage: "Already a member.",
    });
  const row = await db.membership.create({
    data: { tenantId: scope.tenantId, userId: input.userId, role: input.role },
    select: memberSelect,
  });
  return toMemberDTO(row);
}

/**
 * Changes a member's role. Runs in a transaction that locks the tenant's owner rows, so the last
 * owner can never be demoted, even by two concurrent requests.
 */
export async function updateMemberRole(
  scope: TenantScope,
  userId: string,
  role: TenantRole,
  db: DbClient,
): Promise<MemberDTO> {
  return db.$transaction(async (tx) => {
    await assertNotLastOwner(tx, scope, userId, role);
    const { count } = await tx.membership.updateMany({
      where: { tenantId: scope.tenantId, userId },
      data: { role },
    });
    if (count === 0) throw notFound(userId);
    return getMember(scope, userId, tx);
  });
}

export async function removeMember(scope: TenantScope, userId: string, db: DbClient): Promise<void> {
  await db.$transaction(async (tx) => {
    await assertNotLastOwner(tx, scope, userId, null);
    const { count } = await tx.membership.deleteMany({ where: { tenantId: scope.tenantId, userId } });
    if (count === 0) throw notFound(userId);
  });
}

async function assertNotLastOwner(
  tx: Prisma.TransactionClient,
  scope: TenantScope,
  userId: string,
  newRole: TenantRole | null,
): Promise<void> {
  if (newRole === "owner") return;
  const owners = await tx.$queryRaw<{ user_id: string }[]>`
    SELECT user_id FROM memberships WHERE tenant_id = ${scope.tenantId} AND role = 'owner' FOR UPDATE`;
  if (owners.length === 1 && owners[0]?.user_id === userId) {
    throw new AppError("CONFLICT", "a tenant needs at least one owner", {
      userMessage: "A tenant needs at least one owner.",
    });
  }
}

function notFound(userId: string): AppError {
  return new AppError("NOT_FOUND", `member ${userId} not found`, { userMessage: "Member not found." });
}
