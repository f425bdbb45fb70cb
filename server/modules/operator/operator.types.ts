import { ZQuotaOverrides } from "@/server/modules/quota/quota.types";
import { z } from "zod";
import { ZIdempotencyKey } from "@/server/shared/idempotency";

/** A tenant's slug: what its dashboard URL (`/t/<slug>`) and API calls (`tenantSlug`) name it by. */
const ZTenantSlug = z
  .string()
  .trim()
  .min(2)
  .max(48)
  .regex(/^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/, "lowercase letters, digits and inner dashes only");

export const ZTenantCreateRequest = z.object({
  name: z.string().trim().min(1).max(100),
  slug: ZTenantSlug,
  /** Who the first owner's invitation is for (a reminder; no email is sent). */
  ownerNote: z.string().trim().max(200).default(""),
  /** How long the owner's invitation link stays valid: 1 hour to 30 days. */
  expiresInHours: z
    .number()
    .int()
    .min(1)
    .max(24 * 30)
    .default(24 * 7),
  /** The same key from the same operator within 24 hours answers with the first tenant and owner link. */
  idempotencyKey: ZIdempotencyKey.optional(),
});

export const ZTenantRef = z.object({ tenantId: z.string().trim().min(1).max(200) });

/** Replaces a tenant's quota overrides (absent or null: the installation's default). */
export const ZTenantQuotaOverridesRequest = ZTenantRef.extend({ overrides: ZQuotaOverrides });

export const ZTenantSuspendRequest = ZTenantRef.extend({
  reason: z.string().trim().max(500).default("suspended by an operator"),
});

export const ZOperatorGrantRequest = z.object({
  email: z
    .email()
    .max(254)
    .transform((email) => email.toLowerCase()),
});

const ZTenantStatus = z.enum(["active", "suspended", "deleting"]);
export type TenantStatus = z.infer<typeof ZTenantStatus>;

const ZTenantUsage = z.object({
  members: z.number().int(),
  agents: z.number().int(),
  sessions: z.number().int(),
  workspacesLive: z.number().int(),
  workspacesTotal: z.number().int(),
});

export const ZOperatorTenantView = z.object({
  id: z.string(),
  name: z.string(),
  slug: z.string(),
  status: ZTenantStatus,
  statusChangedAt: z.date().nullable(),
  createdAt: z.date(),
  usage: ZTenantUsage,
});
export type OperatorTenantView = z.infer<typeof ZOperatorTenantView>;

const ZOwnerInviteView = z.object({
  id: z.string(),
  state: z.enum(["pending", "accepted", "revoked", "expired"]),
  expiresAt: z.date(),
  acceptedByEmail: z.string().nullable(),
});

export const ZOperatorTenantDetail = ZOperatorTenantView.extend({
  owners: z.array(z.object({ userId: z.string(), email: z.string(), name: z.string() })),
  ownerInvites: z.array(ZOwnerInviteView),
});
export type OperatorTenantDetail = z.infer<typeof ZOperatorTenantDetail>;

/** A new owner invitation: the token travels once, in `path` (`/invite/<token>`), never stored in plain text. */
export const ZOwnerInviteCreated = z.object({
  inviteId: z.string(),
  path: z.string(),
  expiresAt: z.date(),
});

export const ZTenantCreated = z.object({ tenant: ZOperatorTenantView, ownerInvite: ZOwnerInviteCreated });
export type TenantCreated = z.infer<typeof ZTenantCreated>;

export const ZSuspendResult = z.object({
  tenant: ZOperatorTenantView,
  /** Workspaces handed to `workspace.stop` jobs (suspend) — none on resume: the next use provisions them. */
  stopsRequested: z.array(z.string()),
});

export const ZDeleteRequested = z.object({ tenantId: z.string(), jobId: z.string() });

export const ZOperatorView = z.object({
  userId: z.string(),
  email: z.string().nullable(),
  grantedBy: z.string(),
  createdAt: z.date(),
});

export const ZOperatorAuditView = z.object({
  id: z.string(),
  actorType: z.enum(["user", "api_key", "system"]),
  actorId: z.string().nullable(),
  actorEmail: z.string().nullable(),
  action: z.string(),
  targetType: z.string(),
  targetId: z.string(),
  targetLabel: z.string().nullable(),
  outcome: z.enum(["success", "failure"]),
  details: z.unknown(),
  at: z.date(),
});
export type OperatorAuditView = z.infer<typeof ZOperatorAuditView>;

export const ZTenantDeletionReceiptView = z.object({
  id: z.string(),
  tenantId: z.string(),
  tenantSlug: z.string(),
  tenantName: z.string(),
  deleted: z.unknown(),
  actor: z.string(),
  at: z.date(),
});
