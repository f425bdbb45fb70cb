import { z } from "zod";

export const AUDIT_ACTOR_TYPES = ["user", "api_key", "system"] as const;
const AUDIT_OUTCOMES = ["success", "failure"] as const;
export type AuditActorType = (typeof AUDIT_ACTOR_TYPES)[number];

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

const ZAuditLogDTO = z.object({
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

/** The audit log's filters (list and CSV export take the same); all optional, all combined with AND. */
export const ZAuditFilters = z.object({
  action: z.string().min(1).max(100).optional(),
  actorType: z.enum(AUDIT_ACTOR_TYPES).optional(),
  actorId: z.string().min(1).max(200).optional(),
  targetType: z.string().min(1).max(50).optional(),
  targetId: z.string().min(1).max(200).optional(),
  outcome: z.enum(AUDIT_OUTCOMES).optional(),
  /** Inclusive bounds on when the action happened. */
  from: z.date().optional(),
  to: z.date().optional(),
});
export type TAuditFilters = z.infer<typeof ZAuditFilters>;

/** An entry as the dashboard and clients read it: with the actor's name and the failure's reason. */
export const ZAuditLogView = ZAuditLogDTO.extend({
  /** The user's email or `key <name>`; null for system actions or actors unknown to the tenant. */
  actorName: z.string().nullable(),
  /** Why a failed action failed, from its details (`error`, `reason`, `message` or `code`). */
  reason: z.string().nullable(),
});
export type AuditLogView = z.infer<typeof ZAuditLogView>;

export type TPurgeTargetType = "workspace" | "session" | "agent";

export type PurgeReceiptDTO = {
  id: string;
  targetType: TPurgeTargetType;
  targetId: string;
  deleted: unknown;
  actor: string;
  at: Date;
};
