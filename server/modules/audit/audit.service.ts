import type { TenantScope } from "@/server/auth/scope";
import { listAuditLogs } from "./audit.data";

/** The tenant's audit log, newest first, paged and filtered (admins only: the router's gate). */
export function listAuditEntries(scope: TenantScope, options: Parameters<typeof listAuditLogs>[1]) {
  return listAuditLogs(scope, options);
}
