import type { Db } from "@/server/db";
import { createHash, createHmac, randomBytes } from "node:crypto";
import type { z } from "zod";
import type { BerthAuth } from "@/server/auth/auth";
import { assertCan, canGrantRole } from "@/server/auth/policy";
import type { TenantRole } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import { assertTenantAdmits } from "@/server/auth/tenant-suspension";
import type { BerthConfig } from "@/server/config/config";
import { appendAuditLog } from "@/server/modules/audit/audit.data";
import { announceChange } from "@/server/modules/live/change-feed";
import {
  acceptInviteAsNewUser,
  findInviteByCreateKey,
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
import { assertKeyInWindow, isCreateKeyTaken, scopedCreateKey } from "@/server/shared/idempotency";
import { parseInput } from "@/server/shared/parse-input";
import { assertNoUnsafeStrings } from "@/server/shared/unsafe-strings";

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
  deps: LinkSecret,
  db: Db,
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
  const { idempotencyKey, ...link } = input;
  if (!idempotencyKey) return issueInviteLink(scope, { ...link, createdById: scope.userId }, deps, db);
  const createKey = scopedCreateKey(scope, idempotencyKey);
  const earlier = await replayInvite(scope, createKey, deps, db);
  if (earlier) return earlier;
  try {
    return await issueInviteLink(scope, { ...link, createdById: scope.userId }, { createKey, ...deps }, db);
  } catch (error) {
    // The same key raced in concurrently (a double click): the unique index let one through.
    const winner = isCreateKeyTaken(error) ? await replayInvite(scope, createKey, deps, db) : null;
    if (winner) return winner;
    throw error;
  }
}

/** The server's secret keyed invitation links are derived from (the root's `secrets.authSecret`). */
export type LinkSecret = { linkSecret: () => string };

/** The link secret of a root's configuration. */
export function inviteLinkSecret(config: Pick<BerthConfig, "secrets">): LinkSecret {
  return { linkSecret: () => config.secrets.authSecret };
}

/**
 * A keyed invitation's token is derived (HMAC of the server's secret) from the tenant and the scoped key, so
 * a replay can show the same link again while the database still holds only its hash.
 */
function keyedToken(scope: TenantScope, createKey: string, deps: LinkSecret): string {
  const secret = deps.linkSecret();
  const mac = createHmac("sha256", secret).update(`berth:invite-link:v1:${scope.tenantId}:${createKey}`);
  return `${TOKEN_PREFIX}${mac.digest().subarray(0, 24).toString("base64url")}`;
}

/** The invitation (and link) an earlier create with this key made; null when there is none. */
export async function replayInvite(
  scope: TenantScope,
  createKey: string,
  deps: LinkSecret,
  db: Db,
): Promise<{ invite: InviteDTO; token: string } | null> {
  const first = await findInviteByCreateKey(scope, createKey, db);
  if (!first) return null;
  assertKeyInWindow(first.invite.createdAt);
  const token = keyedToken(scope, createKey, deps);
  if (hashInviteToken(token) !== first.tokenHash) {
    // The server's secret changed since: the link cannot be shown again, and a second one is not wanted.
    throw new AppError("CONFLICT", "idempotency key's invitation link can no longer be derived", {
      userMessage:
        "This request was already made, but its link cannot be shown again: revoke it and make a new one.",
    });
  }
  return { invite: first.invite, token };
}

/**
 * Makes the link and records it in the tenant's audit. Callers check who may invite whom: `createInvite`
 * for admins (never an owner), the operator services for a tenant's first owner (`createdById` is then the
 * operator, or "cli").
 */
export async function issueInviteLink(
  scope: TenantScope,
  input: { role: TenantRole; note: string; expiresInHours: number; createdById: string },
  keyed: { createKey?: string } & LinkSecret,
  db: Db,
): Promise<{ invite: InviteDTO; token: string }> {
  const token = keyed.createKey
    ? keyedToken(scope, keyed.createKey, keyed)
    : `${TOKEN_PREFIX}${randomBytes(24).toString("base64url")}`;
  const invite = await insertInvite(
    scope,
    {
      tokenHash: hashInviteToken(token),
      createKey: keyed.createKey ?? null,
      role: input.role,
      note: input.note,
      createdById: input.createdById,
      expiresAt: new Date(Date.now() + input.expiresInHours * 3600_000),
    },
    db,
  );
  announceChange(scope.tenantId, { topic: "invitation" });
  await appendAuditLog(
    scope,
    {
      action: "member.invite",
      targetType: "invitation",
      targetId: invite.id,
      outcome: "success",
      details: { role: input.role, expiresAt: invite.expiresAt.toISOString() },
    },
    db,
  );
  return { invite, token };
}

export async function listTenantInvites(scope: TenantScope, db: Db): Promise<InviteDTO[]> {
  assertCan(scope, "member:manage");
  return listInvites(scope, db);
}

export async function revokeInvite(scope: TenantScope, inviteId: string, db: Db): Promise<void> {
  assertCan(scope, "member:manage");
  if (!(await revokeInviteRow(scope, inviteId, db))) {
    throw new AppError("NOT_FOUND", `no pending invitation ${inviteId}`, {
      userMessage: "No pending invitation with this id.",
    });
  }
  announceChange(scope.tenantId, { topic: "invitation" });
  await appendAuditLog(
    scope,
    {
      action: "member.invite-revoke",
      targetType: "invitation",
      targetId: inviteId,
      outcome: "success",
    },
    db,
  );
}

/**
 * What the invitation page shows (tenant name, role, expiry); NOT_FOUND for a used, revoked or expired link,
 * FORBIDDEN `tenant_suspended` while an operator has the tenant suspended (the link works again on resume).
 */
export async function previewInvite(token: string, db: Db): Promise<InvitePreview> {
  const invite = await findPendingInvite(hashInviteToken(parseInput(ZInviteToken, token)), db);
  if (!invite) throw goneError();
  assertTenantAdmits(invite.tenantId, invite.tenantStatus);
  return { tenantName: invite.tenantName, role: invite.role, expiresAt: invite.expiresAt };
}

/**
 * Accepts an invitation with a new account: name, email and password (hashed by better-auth, so its sign-in
 * accepts it). The caller then signs in with them. CONFLICT when the email already has an account; FORBIDDEN
 * `tenant_suspended` (or `tenant_deleting`) when the tenant is not active. Every refusal leaves the
 * invitation pending.
 */
export async function acceptInvite(
  auth: BerthAuth,
  /** Validated here (`ZInviteAcceptRequest`): it comes straight from a public request body. */
  raw: unknown,
  db: Db,
): Promise<{ tenantSlug: string; email: string }> {
  // This body reaches no tRPC input middleware: refuse what Postgres cannot store here (NUL, lone surrogate).
  assertNoUnsafeStrings(raw);
  const input = parseInput(ZInviteAcceptRequest, raw);
  const invite = await findPendingInvite(hashInviteToken(input.token), db);
  if (!invite) throw goneError();
  assertTenantAdmits(invite.tenantId, invite.tenantStatus);
  const passwordHash = await (await auth.$context).password.hash(input.password);
  const outcome = await acceptInviteAsNewUser(
    {
      inviteId: invite.id,
      tenantId: invite.tenantId,
      role: invite.role,
      name: input.name,
      email: input.email,
      passwordHash,
    },
    db,
  );
  switch (outcome.kind) {
    case "gone":
      throw goneError();
    case "tenant-inactive":
      // Suspended between the read above and the transaction: the same refusal (status is never active here).
      assertTenantAdmits(invite.tenantId, outcome.status);
      throw goneError();
    case "email-taken":
      throw new AppError("CONFLICT", "an account with this email exists", {
        userMessage: "An account with this email already exists. Use another email address.",
      });
    case "accepted":
      // A new member, and one invitation fewer: both lists of the members page.
      announceChange(invite.tenantId, { topic: "member" });
      announceChange(invite.tenantId, { topic: "invitation" });
      return { tenantSlug: outcome.tenantSlug, email: input.email };
  }
}
