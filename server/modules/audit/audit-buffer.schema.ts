import { z } from "zod";
import { AUDIT_ACTOR_TYPES, AUDIT_OUTCOMES } from "./audit.types";

/**
 * An audit entry as it sits in the Redis buffer (JSON), fully resolved: tenant, actor and time are fixed
 * when the action happens, and so is the id, so a flush retried after a partial write inserts each
 * entry at most once (insert … skip duplicates).
 */
export const ZBufferedAuditEntry = z.object({
  id: z.uuid(),
  tenantId: z.string().min(1),
  actorType: z.enum(AUDIT_ACTOR_TYPES),
  actorId: z.string().nullable(),
  action: z.string().min(1).max(100),
  targetType: z.string().max(50).nullish(),
  targetId: z.string().max(200).nullish(),
  outcome: z.enum(AUDIT_OUTCOMES),
  ip: z.string().max(100).nullish(),
  userAgent: z.string().max(500).nullish(),
  details: z.record(z.string(), z.unknown()).nullish(),
  at: z.iso.datetime().transform((value) => new Date(value)),
});
export type TBufferedAuditEntry = z.output<typeof ZBufferedAuditEntry>;
