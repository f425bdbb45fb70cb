import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import { getBackendSettingsService } from "@/server/composition/services";
import {
  ZE2bSettingsPatch,
  ZE2bSettingsView,
} from "@/server/modules/backend-settings/backend-settings.types";

/** A tenant's own settings of the workspace backends (admins): today its E2B team. */
export const backendSettingsRouter = createTRPCRouter({
  /** The tenant's E2B settings; the API key only as a masked hint. */
  e2b: tenantProcedureFor("workspace:manage")
    .input(ZTenantInput)
    .output(ZE2bSettingsView)
    .query(({ ctx }) => getBackendSettingsService().readE2b(ctx.scope)),

  /** Absent fields keep their values; null puts one back to the installation's. Audited, key never logged. */
  setE2b: tenantProcedureFor("workspace:manage")
    .input(ZTenantInput.extend(ZE2bSettingsPatch.shape))
    .output(ZE2bSettingsView)
    .mutation(({ ctx, input: { tenantId: _t, tenantSlug: _s, ...patch } }) =>
      getBackendSettingsService().setE2b(ctx.scope, patch),
    ),

  /** Drops the tenant's settings: its next provisions use the installation's E2B team. */
  clearE2b: tenantProcedureFor("workspace:manage")
    .input(ZTenantInput.extend({ confirm: z.literal(true) }))
    .output(ZE2bSettingsView)
    .mutation(({ ctx }) => getBackendSettingsService().clearE2b(ctx.scope)),
});
