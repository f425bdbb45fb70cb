import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import type { Berth } from "@/server/composition/berth";
import {
  ZEgressPolicy,
  ZEgressPolicyView,
  ZEgressSecretView,
  ZEgressStatus,
  ZSecretCreateRequest,
} from "@/server/modules/egress/egress.types";

const ZAgentTarget = ZTenantInput.extend({ agentId: z.string().min(1).max(200) });
const ZSecretTarget = { secretId: z.string().min(1).max(200) };
const egress = (ctx: { berth: Berth }) => ctx.berth.egress;

/**
 * `egress.*` (issue 25): the tenant's egress policy and secrets (owners: `tenant:manage`), an agent's
 * (admins: `agent:manage`; an agent's policy replaces the tenant's), and a workspace's refused connections.
 * A secret's value goes in once and never comes out: views carry its last 4 characters and its placeholder.
 */
export const egressRouter = createTRPCRouter({
  tenantPolicy: tenantProcedureFor("tenant:read")
    .input(ZTenantInput)
    .output(ZEgressPolicyView)
    .query(({ ctx }) => egress(ctx).policy(ctx.scope)),

  setTenantPolicy: tenantProcedureFor("tenant:manage")
    .input(ZTenantInput.extend({ policy: ZEgressPolicy }))
    .output(ZEgressPolicyView)
    .mutation(({ ctx, input }) => egress(ctx).setPolicy(ctx.scope, undefined, input.policy)),

  agentPolicy: tenantProcedureFor("agent:read")
    .input(ZAgentTarget)
    .output(ZEgressPolicyView)
    .query(({ ctx, input }) => egress(ctx).policy(ctx.scope, input.agentId)),

  /** `policy: null` clears the agent's own policy: it follows the tenant's again. */
  setAgentPolicy: tenantProcedureFor("agent:manage")
    .input(ZAgentTarget.extend({ policy: ZEgressPolicy.nullable() }))
    .output(ZEgressPolicyView)
    .mutation(({ ctx, input }) => egress(ctx).setPolicy(ctx.scope, input.agentId, input.policy)),

  tenantSecrets: tenantProcedureFor("tenant:manage")
    .input(ZTenantInput)
    .output(z.array(ZEgressSecretView))
    .query(({ ctx }) => egress(ctx).listSecrets(ctx.scope)),

  createTenantSecret: tenantProcedureFor("tenant:manage")
    .input(ZTenantInput.extend(ZSecretCreateRequest.shape))
    .output(ZEgressSecretView)
    .mutation(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) =>
      egress(ctx).createSecret(ctx.scope, undefined, input),
    ),

  deleteTenantSecret: tenantProcedureFor("tenant:manage")
    .input(ZTenantInput.extend(ZSecretTarget))
    .mutation(({ ctx, input }) => egress(ctx).deleteSecret(ctx.scope, undefined, input.secretId)),

  agentSecrets: tenantProcedureFor("agent:manage")
    .input(ZAgentTarget)
    .output(z.array(ZEgressSecretView))
    .query(({ ctx, input }) => egress(ctx).listSecrets(ctx.scope, input.agentId)),

  createAgentSecret: tenantProcedureFor("agent:manage")
    .input(ZAgentTarget.extend(ZSecretCreateRequest.shape))
    .output(ZEgressSecretView)
    .mutation(({ ctx, input: { tenantId: _t, tenantSlug: _s, agentId, ...input } }) =>
      egress(ctx).createSecret(ctx.scope, agentId, input),
    ),

  deleteAgentSecret: tenantProcedureFor("agent:manage")
    .input(ZAgentTarget.extend(ZSecretTarget))
    .mutation(({ ctx, input }) => egress(ctx).deleteSecret(ctx.scope, input.agentId, input.secretId)),

  /** The tenant's policy and the workspace's refused connections (count, newest few). */
  workspaceStatus: tenantProcedureFor("workspace:read")
    .input(ZTenantInput.extend({ workspaceId: z.string().min(1).max(200) }))
    .output(ZEgressStatus)
    .query(({ ctx, input }) => egress(ctx).workspaceStatus(ctx.scope, input.workspaceId)),
});
