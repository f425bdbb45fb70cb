import { z } from "zod";
import { ZTenantRole } from "@/server/auth/roles";
import { ZIdempotencyKey } from "@/server/shared/idempotency";

export const ZApiKeyDTO = z.object({
  id: z.string(),
  name: z.string().nullable(),
  /** The first characters of the key (prefix included), for recognising it in lists. */
  start: z.string().nullable(),
  role: ZTenantRole,
  createdByUserId: z.string().nullable(),
  /** The key that minted this one; revoking that key revokes this one too. Null: minted by a user, or detached. */
  mintedByApiKeyId: z.string().nullable(),
  createdAt: z.date(),
  lastUsedAt: z.date().nullable(),
  expiresAt: z.date().nullable(),
  revokedAt: z.date().nullable(),
});
export type ApiKeyDTO = z.infer<typeof ZApiKeyDTO>;

export const ZCreateApiKeyInput = z.object({
  name: z.string().trim().min(1).max(64),
  role: ZTenantRole.exclude(["owner"]).default("member"),
  /** Seconds until the key expires; omitted = never. */
  expiresInSeconds: z
    .number()
    .int()
    .min(24 * 3600)
    .max(365 * 24 * 3600)
    .optional(),
  /**
   * Only for a call made WITH an API key: the new key is then tied to the calling key and revoked with it,
   * unless this is true (an explicit choice, audited; the caller still needs api-key:manage and cannot grant
   * more than its own role). Ignored for signed-in users, whose keys are never tied to another key.
   */
  detached: z.boolean().default(false),
  /**
   * The same key from the same caller within 24 hours returns the first key, with the same plain key (derived
   * from the server's secret, so only its hash is stored) instead of creating again.
   */
  idempotencyKey: ZIdempotencyKey.optional(),
});
export type TCreateApiKeyInput = z.input<typeof ZCreateApiKeyInput>;

/** Returned once, at creation: the only time the plain key exists outside the caller. */
export type CreatedApiKey = { apiKey: ApiKeyDTO; plainKey: string };
