import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { getWebhookService } from "@/server/composition/services";
import { readiness, ZReadinessRange, ZReadinessView } from "@/server/modules/metrics/readiness.service";
import {
  ZWebhookDeliveryView,
  ZWebhookEndpointCreate,
  ZWebhookEndpointView,
} from "@/server/modules/webhook/webhook.types";

const ZEndpointTarget = ZTenantInput.extend({ endpointId: z.string().min(1).max(200) });

/** `operations.*`, admins only: the readiness picture and the tenant's lifecycle webhooks. */
export const operationsRouter = createTRPCRouter({
  /** p50/p95/p99 (ms) per stage, backend and path in [from, to), and the slowest provisions. */
  readiness: tenantProcedureFor("operations:read")
    .input(ZTenantInput.extend(ZReadinessRange.shape))
    .output(ZReadinessView)
    .query(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...range } }) => readiness(ctx.scope, range)),

  webhooks: tenantProcedureFor("webhook:manage")
    .input(ZTenantInput)
    .output(z.array(ZWebhookEndpointView))
    .query(({ ctx }) => getWebhookService().list(ctx.scope)),

  /** The answer's `secret` is shown once: it is stored encrypted and never returned again. */
  createWebhook: tenantProcedureFor("webhook:manage")
    .input(ZTenantInput.extend(ZWebhookEndpointCreate.shape))
    .output(z.object({ endpoint: ZWebhookEndpointView, secret: z.string() }))
    .mutation(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) =>
      getWebhookService().create(ctx.scope, input),
    ),

  deleteWebhook: tenantProcedureFor("webhook:manage")
    .input(ZEndpointTarget)
    .mutation(({ ctx, input }) => getWebhookService().remove(ctx.scope, input.endpointId)),

  testWebhook: tenantProcedureFor("webhook:manage")
    .input(ZEndpointTarget)
    .mutation(({ ctx, input }) => getWebhookService().test(ctx.scope, input.endpointId)),

  webhookDeliveries: tenantProcedureFor("webhook:manage")
    .input(ZTenantInput.extend({ endpointId: z.string().min(1).max(200).optional() }))
    .output(z.array(ZWebhookDeliveryView))
    .query(({ ctx, input }) => getWebhookService().deliveries(ctx.scope, { endpointId: input.endpointId })),
});
