import { AppError } from "@/server/shared/errors";
import type { GateTenantStatus } from "@/server/auth/gate.data";

/**
 * The one refusal of a tenant an operator suspended (or is deleting): FORBIDDEN with
 * `details.reason: "tenant_suspended"` (or `"tenant_deleting"`), the same for cookies, API keys, route
 * handlers and queued jobs (non-retryable, so a worker fails the job at once instead of retrying it).
 */
export function assertTenantAdmits(tenantId: string, status: GateTenantStatus): void {
  if (status === "active") return;
  const reason = status === "suspended" ? "tenant_suspended" : "tenant_deleting";
  throw new AppError("FORBIDDEN", `tenant ${tenantId} is ${status}`, {
    userMessage:
      status === "suspended"
        ? "This tenant is suspended by the operator of this installation. Nothing was deleted; ask the operator to resume it."
        : "This tenant is being deleted by the operator of this installation.",
    details: { reason, tenantId },
  });
}
