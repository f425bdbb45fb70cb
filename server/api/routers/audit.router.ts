import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { createAuditService } from "@/server/modules/audit/audit.service";
import { ZAuditFilters, ZAuditLogView } from "@/server/modules/audit/audit.types";
import { ZPageInput, ZPageOf } from "@/server/shared/page";
import type { Berth } from "@/server/composition/berth";

/** The audit service over the request's root database client. */
const audit = (ctx: { berth: Pick<Berth, "db"> }) => createAuditService(ctx.berth.db);

/** `audit.*`, admins only: the tenant's audit log, filtered on the server; the export takes the same filters. */
export const auditRouter = createTRPCRouter({
  /** Newest first, paged by `cursor` (the previous page's `nextCursor`), each entry with its actor's name. */
  list: tenantProcedureFor("audit:read")
    .input(ZTenantInput.extend({ ...ZPageInput.shape, ...ZAuditFilters.shape }))
    .output(ZPageOf(ZAuditLogView))
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) => audit(ctx).list(ctx.scope, input)),

  /** The actions and the (named) actors found in the log: what the filters offer. */
  facets: tenantProcedureFor("audit:read")
    .input(ZTenantInput)
    .query(({ ctx }) => audit(ctx).facets(ctx.scope)),

  /** `{ csv, rows, truncated }`: the filtered entries, newest first, at most 10,000 rows. */
  exportCsv: tenantProcedureFor("audit:read")
    .input(ZTenantInput.extend(ZAuditFilters.shape))
    .output(z.object({ csv: z.string(), rows: z.number().int(), truncated: z.boolean() }))
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...filters } }) =>
      audit(ctx).exportCsv(ctx.scope, filters),
    ),
});
