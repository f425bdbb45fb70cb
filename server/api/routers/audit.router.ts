import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { listAuditEntries } from "@/server/modules/audit/audit.service";
import { ZAuditLogDTO } from "@/server/modules/audit/audit.types";
import { ZPageInput, ZPageOf } from "@/server/shared/page";

export const auditRouter = createTRPCRouter({
  /** Newest first, paged by `cursor` (the previous page's `nextCursor`). Admins only. */
  list: tenantProcedureFor("audit:read")
    .input(
      ZTenantInput.extend({
        ...ZPageInput.shape,
        action: z.string().min(1).max(100).optional(),
      }),
    )
    .output(ZPageOf(ZAuditLogDTO))
    .query(({ ctx, input }) =>
      listAuditEntries(ctx.scope, { limit: input.limit, cursor: input.cursor, action: input.action }),
    ),
});
