import { z } from "zod";
import { operatorProcedure } from "@/server/api/operator-procedure";
import { createTRPCRouter } from "@/server/api/trpc";
import {
  grantOperator,
  listOperatorsFor,
  readOperatorAudit,
  readTenantDeletionReceipts,
  revokeOperator,
} from "@/server/modules/operator/operator.service";
import {
  ZDeleteRequested,
  ZOperatorAuditView,
  ZOperatorGrantRequest,
  ZOperatorTenantDetail,
  ZOperatorTenantView,
  ZOperatorView,
  ZOwnerInviteCreated,
  ZSuspendResult,
  ZTenantCreated,
  ZTenantCreateRequest,
  ZTenantDeletionReceiptView,
  ZTenantQuotaOverridesRequest,
  ZTenantRef,
  ZTenantSuspendRequest,
} from "@/server/modules/operator/operator.types";
import {
  createOwnerInvite,
  createTenant,
  listTenantsForOperator,
  readTenantForOperator,
  requestTenantDeletion,
  resumeTenant,
  suspendTenant,
} from "@/server/modules/operator/tenant-lifecycle.service";
import { inviteLinkSecret } from "@/server/modules/member/invite.service";
import { readTenantQuota, setTenantQuotaOverrides } from "@/server/modules/operator/tenant-quota.service";
import { ZTenantUsageView } from "@/server/modules/quota/quota.types";
import { ZIdempotencyKey } from "@/server/shared/idempotency";
import { readWarmPools } from "@/server/modules/pool/warm-pool-status.service";
import { ZWarmPoolView } from "@/server/modules/pool/warm-pool.types";

/**
 * `operator.*`: the installation's tenants, for operators only (server/api/operator-procedure.ts). The CLI
 * (`npm run berth`, scripts/berth-cli.ts) calls the same services.
 */
export const operatorRouter = createTRPCRouter({
  /** Whether the caller is an operator: the dashboard shows the operator pages' link from it. */
  me: operatorProcedure.output(z.object({ operator: z.literal(true) })).query(() => ({ operator: true })),

  /** The installation's warm pools (BERTH_WARM_POOLS) with their figures now. */
  warmPools: operatorProcedure
    .output(z.array(ZWarmPoolView))
    .query(({ ctx }) => readWarmPools(ctx.berth.engine, ctx.berth.db)),

  tenants: createTRPCRouter({
    list: operatorProcedure
      .output(z.array(ZOperatorTenantView))
      .query(({ ctx }) => listTenantsForOperator(ctx.operator, ctx.berth.db)),
    get: operatorProcedure
      .input(ZTenantRef)
      .output(ZOperatorTenantDetail)
      .query(({ ctx, input }) => readTenantForOperator(ctx.operator, input, ctx.berth.db)),
    create: operatorProcedure
      .input(ZTenantCreateRequest)
      .output(ZTenantCreated)
      .mutation(({ ctx, input }) =>
        createTenant(ctx.operator, input, inviteLinkSecret(ctx.berth.config), ctx.berth.db),
      ),
    inviteOwner: operatorProcedure
      .input(
        ZTenantRef.extend({
          note: z.string().max(200).optional(),
          idempotencyKey: ZIdempotencyKey.optional(),
        }),
      )
      .output(ZOwnerInviteCreated)
      .mutation(({ ctx, input }) =>
        createOwnerInvite(ctx.operator, input, inviteLinkSecret(ctx.berth.config), ctx.berth.db),
      ),
    suspend: operatorProcedure
      .input(ZTenantSuspendRequest)
      .output(ZSuspendResult)
      .mutation(({ ctx, input }) => suspendTenant(ctx.operator, input, ctx.berth.queues, ctx.berth.db)),
    resume: operatorProcedure
      .input(ZTenantRef)
      .output(ZSuspendResult)
      .mutation(({ ctx, input }) => resumeTenant(ctx.operator, input, ctx.berth.db)),
    delete: operatorProcedure
      .input(ZTenantRef)
      .output(ZDeleteRequested)
      .mutation(({ ctx, input }) =>
        requestTenantDeletion(ctx.operator, input, ctx.berth.queues, ctx.berth.db),
      ),
    /** The tenant's limits (effective, overridden or default) and its use of each. */
    quota: operatorProcedure
      .input(ZTenantRef)
      .output(ZTenantUsageView)
      .query(({ ctx, input }) => readTenantQuota(ctx.operator, input, ctx.berth.quota, ctx.berth.db)),
    /** Replaces the tenant's quota overrides; answers its limits and usage. */
    setQuotaOverrides: operatorProcedure
      .input(ZTenantQuotaOverridesRequest)
      .output(ZTenantUsageView)
      .mutation(({ ctx, input }) =>
        setTenantQuotaOverrides(ctx.operator, input, ctx.berth.quota, ctx.berth.db),
      ),
    deletionReceipts: operatorProcedure
      .output(z.array(ZTenantDeletionReceiptView))
      .query(({ ctx }) => readTenantDeletionReceipts(ctx.operator, undefined, ctx.berth.db)),
  }),

  operators: createTRPCRouter({
    list: operatorProcedure
      .output(z.array(ZOperatorView))
      .query(({ ctx }) => listOperatorsFor(ctx.operator, ctx.berth.db)),
    grant: operatorProcedure
      .input(ZOperatorGrantRequest)
      .output(z.object({ userId: z.string(), granted: z.boolean() }))
      .mutation(({ ctx, input }) => grantOperator(ctx.operator, input, ctx.berth.db)),
    revoke: operatorProcedure
      .input(ZOperatorGrantRequest)
      .output(z.object({ userId: z.string() }))
      .mutation(({ ctx, input }) => revokeOperator(ctx.operator, input, ctx.berth.db)),
  }),

  audit: operatorProcedure
    .input(
      z.object({
        targetId: z.string().max(200).optional(),
        limit: z.number().int().min(1).max(500).optional(),
      }),
    )
    .output(z.array(ZOperatorAuditView))
    .query(({ ctx, input }) => readOperatorAudit(ctx.operator, input, ctx.berth.db)),
});
