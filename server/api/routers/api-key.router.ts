import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import {
  apiKeySecret,
  createApiKey,
  listTenantApiKeys,
  revokeApiKey,
} from "@/server/modules/api-key/api-key.service";
import { ZApiKeyDTO, ZCreateApiKeyInput } from "@/server/modules/api-key/api-key.types";

export const apiKeyRouter = createTRPCRouter({
  list: tenantProcedureFor("api-key:read")
    .input(ZTenantInput.extend({ includeRevoked: z.boolean().default(false) }))
    .output(z.array(ZApiKeyDTO))
    .query(({ ctx, input }) =>
      listTenantApiKeys(ctx.scope, { includeRevoked: input.includeRevoked }, ctx.berth.db),
    ),

  /**
   * The plain key is in this response and nowhere else: only its hash is stored. With `idempotencyKey`, the
   * same key from the same caller (24 hours) returns the first key and the same plain key (derived, not stored).
   */
  create: tenantProcedureFor("api-key:manage")
    .input(ZTenantInput.extend(ZCreateApiKeyInput.shape))
    .output(z.object({ apiKey: ZApiKeyDTO, plainKey: z.string() }))
    .mutation(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...input } }) =>
      createApiKey(ctx.runtime.auth, ctx.scope, input, apiKeySecret(ctx.berth.config), ctx.berth.db),
    ),

  revoke: tenantProcedureFor("api-key:manage")
    .input(ZTenantInput.extend({ apiKeyId: z.string().min(1).max(200) }))
    .output(ZApiKeyDTO)
    .mutation(({ ctx, input }) => revokeApiKey(ctx.scope, input.apiKeyId, ctx.berth.db)),
});
