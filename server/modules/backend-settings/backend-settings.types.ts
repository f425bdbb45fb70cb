import { z } from "zod";
import { ZBackendKind } from "@/server/workspace/drivers/kind";

/** A field value on the wire: strings and numbers; null puts the installation's value back. */
const ZFieldValue = z.union([z.string().max(4_096), z.number(), z.null()]);

/**
 * `backendSettings.set`'s input, for any backend whose driver declares tenant settings. Absent fields keep
 * their values; null puts one back to the installation's. The driver's schema validates the values (unknown
 * fields are dropped); its secret field is write-only: sealed on arrival, only its hint ever answered.
 */
export const ZBackendSettingsPatch = z.object({
  backend: ZBackendKind,
  settings: z.record(z.string().max(100), ZFieldValue),
});

/** What a tenant admin sees of one backend's settings: the non-secret fields and a hint of the secret. */
export const ZBackendSettingsView = z.object({
  backend: z.string(),
  /** The tenant has settings: its workspaces use them over the installation's. */
  configured: z.boolean(),
  /** The secret's last four characters ("…a1b2"), or null when the installation's applies. */
  secretHint: z.string().nullable(),
  /** Every non-secret field the driver declares, null where the installation's applies. */
  values: z.record(z.string(), z.union([z.string(), z.number(), z.null()])),
  updatedAt: z.date().nullable(),
});
export type BackendSettingsView = z.infer<typeof ZBackendSettingsView>;

/** One field as the settings card edits it (from the driver's schema). */
const ZBackendSettingsField = z.object({
  name: z.string(),
  title: z.string(),
  type: z.enum(["string", "integer", "number"]),
  secret: z.boolean(),
  minimum: z.number().nullable(),
  maximum: z.number().nullable(),
});
export type BackendSettingsField = z.infer<typeof ZBackendSettingsField>;

/** A backend of this installation that takes tenant settings: its card and the tenant's current values. */
export const ZBackendSettingsForm = z.object({
  backend: z.string(),
  label: z.string(),
  title: z.string(),
  description: z.string(),
  fields: z.array(ZBackendSettingsField),
  current: ZBackendSettingsView,
});
export type BackendSettingsForm = z.infer<typeof ZBackendSettingsForm>;
