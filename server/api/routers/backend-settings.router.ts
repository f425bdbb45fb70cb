import { z } from "zod";
import { createTRPCRouter, tenantProcedureFor, ZTenantInput } from "@/server/api/trpc";
import {
  ZBackendSettingsForm,
  ZBackendSettingsPatch,
  ZBackendSettingsView,
} from "@/server/modules/backend-settings/backend-settings.types";
import { ZBackendKind } from "@/server/modules/agent/agent.types";

/**
 * A tenant's own settings of the workspace backends (admins), for every backend whose driver declares
 * some (`DriverDefinition.tenantSettings`; today E2B: its team's API key, template, domain, minimum size).
 */
export const backendSettingsRouter = createTRPCRouter({
  /** The backends of this installation that take tenant settings: fields and the tenant's values. */
  forms: tenantProcedureFor("workspace:manage")
    .input(ZTenantInput)
    .output(z.array(ZBackendSettingsForm))
    .query(({ ctx }) => ctx.berth.backendSettings.forms(ctx.scope)),

  /** The tenant's settings of one backend; its secret only as a masked hint. */
  read: tenantProcedureFor("workspace:manage")
    .input(ZTenantInput.extend({ backend: ZBackendKind }))
    .output(ZBackendSettingsView)
    .query(({ ctx, input }) => ctx.berth.backendSettings.read(ctx.scope, input.backend)),

  /** Absent fields keep their values; null puts one back to the installation's. Audited, secret never logged. */
  set: tenantProcedureFor("workspace:manage")
    .input(ZTenantInput.extend(ZBackendSettingsPatch.shape))
    .output(ZBackendSettingsView)
    .mutation(({ ctx, input }) =>
      ctx.berth.backendSettings.set(ctx.scope, { backend: input.backend, settings: input.settings }),
    ),

  /** Drops the tenant's settings of one backend: its next provisions use the installation's. */
  clear: tenantProcedureFor("workspace:manage")
    .input(ZTenantInput.extend({ backend: ZBackendKind, confirm: z.literal(true) }))
    .output(ZBackendSettingsView)
    .mutation(({ ctx, input }) => ctx.berth.backendSettings.clear(ctx.scope, input.backend)),
});
