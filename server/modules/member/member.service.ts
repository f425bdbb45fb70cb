import { assertCan, canGrantRole } from "@/server/auth/policy";
import type { TenantRole } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import type { Db } from "@/server/db";
import { AppError } from "@/server/shared/errors";
import { appendAuditLog } from "@/server/modules/audit/audit.data";
import { announceChange } from "@/server/modules/live/change-feed";
import {
  getMember,
  listMembers,
  removeMember as removeMemberRow,
  updateMemberRole,
} from "@/server/modules/member/member.data";
import type { MemberDTO } from "@/server/modules/member/member.types";

/** Admins change roles up to their own; only owners touch owners. */
export async function changeMemberRole(
  db: Db,
  scope: TenantScope,
  userId: string,
  role: TenantRole,
): Promise<MemberDTO> {
  assertCan(scope, "member:manage");
  const target = await getMember(scope, userId, db);
  if (!canGrantRole(scope.role, role) || !canGrantRole(scope.role, target.role)) {
    throw new AppError("FORBIDDEN", `role ${scope.role} may not change ${target.role} to ${role}`, {
      userMessage: "You cannot change this member's role.",
    });
  }
  const member = await updateMemberRole(scope, userId, role, db);
  announceChange(scope.tenantId, { topic: "member", userId });
  await appendAuditLog(
    scope,
    {
      action: "member.role-change",
      targetType: "user",
      targetId: userId,
      outcome: "success",
      details: { from: target.role, to: role },
    },
    db,
  );
  return member;
}

export async function removeMember(db: Db, scope: TenantScope, userId: string): Promise<void> {
  assertCan(scope, "member:manage");
  const target = await getMember(scope, userId, db);
  if (!canGrantRole(scope.role, target.role)) {
    throw new AppError("FORBIDDEN", `role ${scope.role} may not remove a ${target.role}`, {
      userMessage: "You cannot remove this member.",
    });
  }
  await removeMemberRow(scope, userId, db);
  announceChange(scope.tenantId, { topic: "member", userId });
  await appendAuditLog(
    scope,
    {
      action: "member.remove",
      targetType: "user",
      targetId: userId,
      outcome: "success",
    },
    db,
  );
}

/** The tenant's members with their roles. */
export function listTenantMembers(db: Db, scope: TenantScope): Promise<MemberDTO[]> {
  return listMembers(scope, db);
}
