import { z } from "zod";

export const AUDIT_ACTOR_TYPES = ["user", "api_key", "system"] as const;
export const AUDIT_OUTCOMES = ["success", "failure"] as const;

export const ZAuditEntryInput = z.object({
  /** Dotted verb, e.g. "agent.create", "api-key.revoke", "auth.sign-in". */
  action: z.string().min(1).max(100),
  targetType: z.string().max(50).nullish(),
  targetId: z.string().max(200).nullish(),
  outcome: z.enum(AUDIT_OUTCOMES),
  ip: z.string().max(100).nullish(),
  userAgent: z.string().max(500).nullish(),
  /** Non-secret facts only. */
  details: z.record(z.string(), z.unknown()).nullish(),
  /** Defaults to the scope's actor (API key, else user, else system). */
  actor: z.object({ type: z.enum(AUDIT_ACTOR_TYPES), id: z.string().nullable() }).optional(),
  /** When the action happened; defaults to now (set it when flushing buffered entries). */
  at: z.date().optional(),
});
export type TAuditEntryInput = z.input<typeof ZAuditEntryInput>;

/**
 * An entry as written to the table: optionally with its id fixed by the caller (the audit buffer mints it
 * when the action happens), so writing the same entry twice (a retried flush) inserts it once.
 */
export const ZAuditRowInput = ZAuditEntryInput.extend({ id: z.uuid().optional() });
export type TAuditRowInput = z.input<typeof ZAuditRowInput>;

export const ZAuditLogDTO = z.object({
  id: z.string(),
  actorType: z.enum(AUDIT_ACTOR_TYPES),
  actorId: z.string().nullable(),
  action: z.string(),
  targetType: z.string().nullable(),
  targetId: z.string().nullable(),
  outcome: z.enum(AUDIT_OUTCOMES),
  ip: z.string().nullable(),
  userAgent: z.string().nullable(),
  details: z.unknown().nullable(),
  at: z.date(),
});
export type AuditLogDTO = z.infer<typeof ZAuditLogDTO>;

export const PURGE_TARGET_TYPES = ["workspace", "session", "agent"] as const;
export type TPurgeTargetType = (typeof PURGE_TARGET_TYPES)[number];

export const ZPurgeReceiptDTO = z.object({
  id: z.string(),
  targetType: z.enum(PURGE_TARGET_TYPES),
  targetId: z.string(),
  deleted: z.unknown(),
  actor: z.string(),
  at: z.date(),
});
export type PurgeReceiptDTO = z.infer<typeof ZPurgeReceiptDTO>;
