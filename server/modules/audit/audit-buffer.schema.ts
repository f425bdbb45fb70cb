import { z } from "zod";
import { AUDIT_ACTOR_TYPES, ZAuditEntryInput } from "./audit.types";

/**
 * An audit entry as it sits in the Redis buffer (JSON), fully resolved: tenant, actor and time are fixed
 * when the action happens, and so is the id, so a flush retried after a partial write inserts each
 * entry at most once (insert … skip duplicates).
 */
export const ZBufferedAuditEntry = ZAuditEntryInput.pick({
  action: true,
  targetType: true,
  targetId: true,
  outcome: true,
  ip: true,
  userAgent: true,
  details: true,
}).extend({
  id: z.uuid(),
  tenantId: z.string().min(1),
  actorType: z.enum(AUDIT_ACTOR_TYPES),
  actorId: z.string().nullable(),
  at: z.iso.datetime().transform((value) => new Date(value)),
});
export type TBufferedAuditEntry = z.output<typeof ZBufferedAuditEntry>;
