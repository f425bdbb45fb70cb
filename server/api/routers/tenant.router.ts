import { z } from "zod";
import { authedProcedure, createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { resolveTenantScope } from "@/server/auth/resolve";
import { ZTenantRole } from "@/server/auth/roles";
import { listUserTenants, readTenant, readTenantOverview } from "@/server/modules/tenant/tenant.service";
import { ZTenantCountsDTO, ZTenantDTO } from "@/server/modules/tenant/tenant.types";
import {
  changeTenantPolicy,
  MIN_TENANT_IDLE_TTL_MS,
  type OperatorLimits,
  readTenantPolicy,
  viewTenantPolicy,
  ZTenantPolicyPatch,
  ZTenantPolicyView,
} from "@/server/modules/tenant/tenant-policy";
import type { Berth } from "@/server/composition/berth";

/** What the installation allows a tenant (its engine's configuration, BERTH_WORKSPACE_IDLE_TTL_MS). */
const operatorLimits = (ctx: { berth: Berth }): OperatorLimits => ({
  idleTtlMs: ctx.berth.engine.config.idleTtlMs,
  minIdleTtlMs: MIN_TENANT_IDLE_TTL_MS,
});

const ZMembershipDTO = ZTenantDTO.extend({
  role: ZTenantRole,
  /** Not `active`: an operator suspended the tenant (or is deleting it); its tenant calls are refused. */
  status: z.enum(["active", "suspended", "deleting"]),
});

const ZMeOutput = z.object({
  principal: z.discriminatedUnion("kind", [
    z.object({ kind: z.literal("user"), userId: z.string(), email: z.string(), name: z.string() }),
    z.object({ kind: z.literal("api_key"), apiKeyId: z.string(), tenantId: z.string() }),
  ]),
  tenants: z.array(ZMembershipDTO),
});

const ZOverviewOutput = z.object({
  tenant: ZTenantDTO,
  role: ZTenantRole,
  counts: ZTenantCountsDTO,
});

export const tenantRouter = createTRPCRouter({
  /** Who I am and the tenants I can use (an API key sees only its own tenant, with its effective role). */
  me: authedProcedure
    .input(z.object({}).strict().optional())
    .output(ZMeOutput)
    .query(async ({ ctx }) => {
      const { principal } = ctx;
      if (principal.kind === "user") {
        const { userId, email, name } = principal;
        return {
          principal: { kind: "user", userId, email, name },
          tenants: await listUserTenants(userId, ctx.berth.db),
        };
      }
      const scope = await resolveTenantScope(principal, principal.tenantId, ctx.berth.db);
      const tenant = await readTenant(scope, ctx.berth.db);
      return {
        principal: { kind: "api_key", apiKeyId: principal.apiKeyId, tenantId: principal.tenantId },
        // The key opened its tenant: a suspended one would have been refused above.
        tenants: [{ ...tenant, role: scope.role, status: "active" as const }],
      };
    }),

  /** The dashboard overview: counts of agents, sessions and workspaces (and members, keys). */
  overview: tenantProcedureFor("tenant:read")
    .input(ZTenantInput)
    .output(ZOverviewOutput)
    .query(async ({ ctx }) => {
      const { tenant, counts } = await readTenantOverview(ctx.scope, ctx.berth.db);
      return { tenant, role: ctx.scope.role, counts };
    }),

  /**
   * The tenant's policy: who may declare stdio MCP servers, the default isolation policy of its agents and
   * its workspaces' idle TTL, with what the operator allows (`operator`) and what applies (`effective`).
   */
  policy: tenantProcedureFor("tenant:read")
    .input(ZTenantInput)
    .output(ZTenantPolicyView)
    .query(async ({ ctx }) =>
      viewTenantPolicy(await readTenantPolicy(ctx.scope, ctx.berth.db), operatorLimits(ctx).idleTtlMs),
    ),

  /** Owners only. Absent fields keep their values; null puts a default back to the installation's. */
  setPolicy: tenantProcedureFor("tenant:manage")
    .input(ZTenantInput.extend(ZTenantPolicyPatch.shape))
    .output(ZTenantPolicyView)
    .mutation(async ({ ctx, input: { tenantId: _t, tenantSlug: _s, ...patch } }) => {
      const operator = operatorLimits(ctx);
      return viewTenantPolicy(
        await changeTenantPolicy(ctx.scope, patch, operator, ctx.berth.audit, ctx.berth.db),
        operator.idleTtlMs,
      );
    }),
});
