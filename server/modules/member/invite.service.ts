import { createHash, randomBytes } from "node:crypto";
import type { z } from "zod";
import type { BerthAuth } from "@/server/auth/auth";
import { assertCan, canGrantRole } from "@/server/auth/policy";
import type { TenantRole } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import { appendAuditLog } from "@/server/modules/audit/audit.data";
import {
  acceptInviteAsNewUser,
  findPendingInvite,
  insertInvite,
  listInvites,
  revokeInvite as revokeInviteRow,
} from "@/server/modules/member/invite.data";
import {
  type InviteDTO,
  type InvitePreview,
  ZInviteAcceptRequest,
  ZInviteCreateRequest,
  ZInviteToken,
} from "@/server/modules/member/invite.types";
import { AppError } from "@/server/shared/errors";
import { parseInput } from "@/server/shared/parse-input";

const TOKEN_PREFIX = "berth_inv_";

/** Only the hash is stored: a database leak does not hand out working links. */
export const hashInviteToken = (token: string): string => createHash("sha256").update(token).digest("hex");

const goneError = () =>
  new AppError("NOT_FOUND", "invitation not found, used, revoked or expired", {
    userMessage: "This invitation link is not valid any more: it was used, revoked or has expired.",
  });

/**
 * Creates an invitation link for `role` (admins up to their own role; nobody invites an owner). The token is
 * returned once, here; the list shows the invitation without it.
 */
export async function createInvite(
  scope: TenantScope,
  raw: z.input<typeof ZInviteCreateRequest>,
): Promise<{ invite: InviteDTO; token: string }> {
  assertCan(scope, "member:manage");
  const input = parseInput(ZInviteCreateRequest, raw);
  if (!scope.userId || scope.apiKeyId) {
    throw new AppError("FORBIDDEN", "invitations are made by people, not API keys", {
      userMessage: "Sign in to invite people: API keys cannot create invitations.",
    });
  }
  if (!canGrantRole(scope.role, input.role)) {
    throw new AppError("FORBIDDEN", `role ${scope.role} may not invite a ${input.role}`, {
      userMessage: `You cannot invite someone as ${input.role}.`,
    });
  }
  return issueInviteLink(scope, { ...input, createdById: scope.userId });
}

/**
 * Makes the link and records it in the tenant's audit. Callers check who may invite whom: `createInvite`
 * for admins (never an owner), the operator services for a tenant's first owner (`createdById` is then the
 * operator, or "cli").
 */
export async function issueInviteLink(
  scope: TenantScope,
  input: { role: TenantRole; note: string; expiresInHours: number; createdById: string },
): Promise<{ invite: InviteDTO; token: string }> {
  const token = `${TOKEN_PREFIX}${randomBytes(24).toString("base64url")}`;
  const invite = await insertInvite(scope, {
    tokenHash: hashInviteToken(token),
    role: input.role,
    note: input.note,
    createdById: input.createdById,
    expiresAt: new Date(Date.now() + input.expiresInHours * 3600_000),
  });
  await appendAuditLog(scope, {
    action: "member.invite",
    targetType: "invitation",
    targetId: invite.id,
    outcome: "success",
    details: { role: input.role, expiresAt: invite.expiresAt.toISOString() },
  });
  return { invite, token };
}

export async function listTenantInvites(scope: TenantScope): Promise<InviteDTO[]> {
  assertCan(scope, "member:manage");
  return listInvites(scope);
}

export async function revokeInvite(scope: TenantScope, inviteId: string): Promise<void> {
  assertCan(scope, "member:manage");
  if (!(await revokeInviteRow(scope, inviteId))) {
    throw new AppError("NOT_FOUND", `no pending invitation ${inviteId}`, {
      userMessage: "No pending invitation with this id.",
    });
  }
  await appendAuditLog(scope, {
    action: "member.invite-revoke",
    targetType: "invitation",
    targetId: inviteId,
    outcome: "success",
  });
}

/** What the invitation page shows (tenant name, role, expiry); NOT_FOUND for a used, revoked or expired link. */
export async function previewInvite(token: string): Promise<InvitePreview> {
  const invite = await findPendingInvite(hashInviteToken(parseInput(ZInviteToken, token)));
  if (!invite) throw goneError();
  return { tenantName: invite.tenantName, role: invite.role, expiresAt: invite.expiresAt };
}

/**
 * Accepts an invitation with a new account: name, email and password (hashed by better-auth, so its sign-in
 * accepts it). The caller then signs in with them. CONFLICT when the email already has an account.
 */
export async function acceptInvite(
  auth: BerthAuth,
  /** Validated here (`ZInviteAcceptRequest`): it comes straight from a public request body. */
  raw: unknown,
): Promise<{ tenantSlug: string; email: string }> {
  const input = parseInput(ZInviteAcceptRequest, raw);
  const invite = await findPendingInvite(hashInviteToken(input.token));
  if (!invite) throw goneError();
  const passwordHash = await (await auth.$context).password.hash(input.password);
  const outcome = await acceptInviteAsNewUser({
    inviteId: invite.id,
    tenantId: invite.tenantId,
    role: invite.role,
    name: input.name,
    email: input.email,
    passwordHash,
  });
  switch (outcome.kind) {
    case "gone":
      throw goneError();
    case "email-taken":
      throw new AppError("CONFLICT", "an account with this email exists", {
        userMessage: "An account with this email already exists. Use another email address.",
      });
    case "accepted":
      return { tenantSlug: outcome.tenantSlug, email: input.email };
  }
}
