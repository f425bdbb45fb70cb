import { z } from "zod";
import { createTRPCRouter, tenantAdminProcedure, ZTenantInput } from "@/server/api/trpc";
import { ZJobsListRequest } from "@/server/modules/jobs/jobs.service";
import type { Berth } from "@/server/composition/berth";

const jobs = (ctx: { berth: Berth }) => ctx.berth.agents.jobs;

/** `jobs.*` for admins: the tenant's background jobs (by the payload's tenantId) and retrying failed ones. */
export const jobsRouter = createTRPCRouter({
  list: tenantAdminProcedure
    .input(ZTenantInput.extend(ZJobsListRequest.shape))
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) => jobs(ctx).list(ctx.scope, input)),

  retry: tenantAdminProcedure
    .input(ZTenantInput.extend({ jobId: z.string().min(1).max(300) }))
    .mutation(({ ctx, input }) => jobs(ctx).retry(ctx.scope, input.jobId)),
});
