import type { TenantScope } from "@/server/auth/scope";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { auditFailureDetails } from "@/server/modules/audit/audit-failure";

export type AuditTarget = {
  action: string;
  targetType: string;
  targetId: string | null;
  /** Non-secret facts only (never a key, never message text). */
  details?: Record<string, unknown>;
};

/**
 * Runs a mutation and records it in the audit log with its outcome (a failure's code and, for a caller's error, its message), so an
 * admin sees attempts as well as changes. An audit write that fails is reported, not thrown: the mutation
 * already happened and must not look failed to the caller.
 */
export async function audited<T>(
  /** Where the entry is buffered (the root's `berth.audit`). */
  audit: AuditRecorder,
  scope: TenantScope,
  target: AuditTarget,
  fn: () => Promise<T>,
  onAuditFailure: (error: unknown) => void = () => undefined,
  /** Facts known only after the mutation (e.g. the id of what it created). */
  resultDetails: (result: T) => { targetId?: string; details?: Record<string, unknown> } = () => ({}),
): Promise<T> {
  const write = (outcome: "success" | "failure", targetId: string | null, extra: Record<string, unknown>) =>
    audit
      .record(scope, {
        action: target.action,
        targetType: target.targetType,
        targetId,
        outcome,
        details: { ...target.details, ...extra },
      })
      .catch(onAuditFailure);
  let result: T;
  try {
    result = await fn();
  } catch (error) {
    await write("failure", target.targetId, auditFailureDetails(error));
    throw error;
  }
  const after = resultDetails(result);
  await write("success", after.targetId ?? target.targetId, after.details ?? {});
  return result;
}
