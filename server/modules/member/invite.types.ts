import { z } from "zod";
import { type TenantRole, ZTenantRole } from "@/server/auth/roles";
import { ZIdempotencyKey } from "@/server/shared/idempotency";

/** What the tenant's admins see of an invitation: never the token (only its hash is stored). */
export const ZInviteDTO = z.object({
  id: z.string(),
  role: ZTenantRole,
  note: z.string(),
  createdAt: z.date(),
  expiresAt: z.date(),
  createdByEmail: z.string().nullable(),
  acceptedAt: z.date().nullable(),
  acceptedByEmail: z.string().nullable(),
  revokedAt: z.date().nullable(),
  state: z.enum(["pending", "accepted", "revoked", "expired"]),
});
export type InviteDTO = z.infer<typeof ZInviteDTO>;

export const ZInviteCreateRequest = z.object({
  role: ZTenantRole.exclude(["owner"]),
  /** Who it is for, as a reminder in the list (no email is sent). */
  note: z.string().trim().max(200).default(""),
  /** 1 hour to 30 days. */
  expiresInHours: z
    .number()
    .int()
    .min(1)
    .max(24 * 30)
    .default(24 * 7),
  /** One per create (e.g. per form submission): the same key from the same admin returns the first link. */
  idempotencyKey: ZIdempotencyKey.optional(),
});

/** What the invitation page shows before the person accepts. */
export type InvitePreview = { tenantName: string; role: TenantRole; expiresAt: Date };

/** The token as it travels in the link: a fixed prefix and 32 url-safe characters. */
export const ZInviteToken = z.string().regex(/^berth_inv_[A-Za-z0-9_-]{32}$/, "not an invitation token");

export const ZInviteAcceptRequest = z.object({
  token: ZInviteToken,
  name: z.string().trim().min(1).max(100),
  email: z
    .email()
    .max(254)
    .transform((email) => email.toLowerCase()),
  password: z.string().min(8, "at least 8 characters").max(128),
});
