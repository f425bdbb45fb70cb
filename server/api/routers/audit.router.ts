import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { listAuditLogs } from "@/server/modules/audit/audit.data";
import { ZAuditLogDTO } from "@/server/modules/audit/audit.types";

export const auditRouter = createTRPCRouter({
  /** Newest first, paged by `cursor` (the previous page's `nextCursor`). Admins only. */
  list: tenantProcedureFor("audit:read")
    .input(
      ZTenantInput.extend({
        limit: z.number().int().min(1).max(200).default(50),
        cursor: z.string().min(1).max(200).optional(),
        action: z.string().min(1).max(100).optional(),
      }),
    )
    .output(z.object({ items: z.array(ZAuditLogDTO), nextCursor: z.string().nullable() }))
    .query(({ ctx, input }) =>
      listAuditLogs(ctx.scope, { limit: input.limit, cursor: input.cursor, action: input.action }),
    ),
});
