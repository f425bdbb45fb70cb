import { z } from "zod";
import { createTRPCRouter, tenantAdminProcedure, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { ZQueueDepthView } from "@/server/modules/jobs/jobs.service";
import { tenantActivity, ZActivityView } from "@/server/modules/metrics/activity.service";
import {
  workspaceResources,
  ZResourceRange,
  ZWorkspaceResourcesView,
} from "@/server/modules/metrics/resource-usage.service";
import { tenantUsageOverview, ZUsageOverview } from "@/server/modules/metrics/usage-overview.service";
import {
  gettingStarted,
  overviewTrends,
  ZGettingStarted,
  ZOverviewTrends,
} from "@/server/modules/metrics/overview-trends.service";
import { readiness, ZReadinessRange, ZReadinessView } from "@/server/modules/metrics/readiness.service";
import {
  workspaceTimeline,
  workspaceTimings,
  ZTimelineQuery,
  ZWorkspaceTimelineView,
  ZWorkspaceTimingsView,
} from "@/server/modules/metrics/workspace-timings.service";
import {
  ZWebhookDeliveryView,
  ZWebhookEndpointCreate,
  ZWebhookEndpointView,
} from "@/server/modules/webhook/webhook.types";

const ZWorkspaceTarget = ZTenantInput.extend({ workspaceId: z.string().min(1).max(200) });
const ZEndpointTarget = ZTenantInput.extend({ endpointId: z.string().min(1).max(200) });

/** `operations.*`: the readiness picture and lifecycle webhooks (admins), the Overview's activity (all). */
export const operationsRouter = createTRPCRouter({
  /** p50/p95/p99 (ms) per stage, backend and path in [from, to), and the slowest provisions. */
  readiness: tenantProcedureFor("operations:read")
    .input(ZTenantInput.extend(ZReadinessRange.shape))
    .output(ZReadinessView)
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...range } }) =>
      readiness(ctx.scope, range, ctx.berth.db),
    ),

  /** The Overview's charts (every member may read them): starts per hour, turns per day, ok and failed. */
  activity: tenantProcedureFor("tenant:read")
    .input(ZTenantInput)
    .output(ZActivityView)
    .query(({ ctx }) => tenantActivity(ctx.scope, undefined, ctx.berth.db)),

  /** The Overview's trend charts (every member): workspaces by state per hour, failed turns per day. */
  trends: tenantProcedureFor("tenant:read")
    .input(ZTenantInput)
    .output(ZOverviewTrends)
    .query(({ ctx }) => overviewTrends(ctx.scope, undefined, ctx.berth.db)),

  /** The Overview's getting-started checklist (every member), each step checked from the tenant's data. */
  gettingStarted: tenantProcedureFor("tenant:read")
    .input(ZTenantInput)
    .output(ZGettingStarted)
    .query(({ ctx }) => gettingStarted(ctx.scope, ctx.berth.db)),

  /** The Overview's usage tiles (every member): tokens per day and the top agents, from the ledger. */
  usage: tenantProcedureFor("tenant:read")
    .input(ZTenantInput)
    .output(ZUsageOverview)
    .query(({ ctx }) => tenantUsageOverview(ctx.scope, undefined, ctx.berth.db)),

  /** The Overview's queue tile (admins, as the Jobs page): the tenant's waiting/active/delayed/failed jobs. */
  queueDepth: tenantAdminProcedure
    .input(ZTenantInput)
    .output(z.array(ZQueueDepthView))
    .query(({ ctx }) => ctx.berth.agents.jobs.depth(ctx.scope)),

  /** One workspace's stage figures and latest provisions (whoever may read the workspace). */
  workspaceTimings: tenantProcedureFor("workspace:read")
    .input(ZWorkspaceTarget)
    .output(ZWorkspaceTimingsView)
    .query(({ ctx, input }) => workspaceTimings(ctx.scope, input.workspaceId, ctx.berth.db)),

  /** One workspace's lifecycle (events, provisions, attaches) in time order, paged back by `cursor`. */
  workspaceTimeline: tenantProcedureFor("workspace:read")
    .input(ZWorkspaceTarget.extend(ZTimelineQuery.shape))
    .output(ZWorkspaceTimelineView)
    .query(({ ctx, input: { workspaceId, limit, cursor } }) =>
      workspaceTimeline(ctx.scope, workspaceId, { limit, cursor }, ctx.berth.db),
    ),

  /** One workspace's CPU, memory, disk and processes over a range; `supported` false: none is sampled. */
  workspaceResources: tenantProcedureFor("workspace:read")
    .input(ZWorkspaceTarget.extend(ZResourceRange.shape))
    .output(ZWorkspaceResourcesView)
    .query(({ ctx, input }) =>
      workspaceResources(
        ctx.scope,
        input.workspaceId,
        { range: input.range },
        { drivers: ctx.berth.engine.drivers },
        undefined,
        ctx.berth.db,
      ),
    ),

  webhooks: tenantProcedureFor("webhook:manage")
    .input(ZTenantInput)
    .output(z.array(ZWebhookEndpointView))
    .query(({ ctx }) => ctx.berth.webhooks.list(ctx.scope)),

  /** The answer's `secret` is shown once: it is stored encrypted and never returned again. */
  createWebhook: tenantProcedureFor("webhook:manage")
    .input(ZTenantInput.extend(ZWebhookEndpointCreate.shape))
    .output(z.object({ endpoint: ZWebhookEndpointView, secret: z.string() }))
    .mutation(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) =>
      ctx.berth.webhooks.create(ctx.scope, input),
    ),

  deleteWebhook: tenantProcedureFor("webhook:manage")
    .input(ZEndpointTarget)
    .mutation(({ ctx, input }) => ctx.berth.webhooks.remove(ctx.scope, input.endpointId)),

  testWebhook: tenantProcedureFor("webhook:manage")
    .input(ZEndpointTarget)
    .mutation(({ ctx, input }) => ctx.berth.webhooks.test(ctx.scope, input.endpointId)),

  webhookDeliveries: tenantProcedureFor("webhook:manage")
    .input(ZTenantInput.extend({ endpointId: z.string().min(1).max(200).optional() }))
    .output(z.array(ZWebhookDeliveryView))
    .query(({ ctx, input }) => ctx.berth.webhooks.deliveries(ctx.scope, { endpointId: input.endpointId })),
});
