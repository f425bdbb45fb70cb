import { z } from "zod";
import { ZE2bTenantSettings } from "@/server/workspace/backends/e2b/e2b-config";

const fields = ZE2bTenantSettings.shape;

/**
 * `backendSettings.setE2b`'s input. Absent fields keep their values; null puts one back to the installation's.
 * The API key is write-only: it is sealed on arrival and only its hint is ever answered.
 */
export const ZE2bSettingsPatch = z
  .object({
    apiKey: fields.apiKey.unwrap().nullable().optional(),
    domain: fields.domain.unwrap().nullable().optional(),
    template: fields.template.unwrap().nullable().optional(),
    minCpuCount: fields.minCpuCount.unwrap().nullable().optional(),
    minMemoryMB: fields.minMemoryMB.unwrap().nullable().optional(),
  })
  .strict();

/** What a tenant admin sees: the non-secret fields and a masked hint of the key, never the key. */
export const ZE2bSettingsView = z.object({
  /** The tenant has settings: its workspaces use them over the installation's. */
  configured: z.boolean(),
  /** The key's last four characters ("…a1b2"), or null when the installation's key applies. */
  apiKeyHint: z.string().nullable(),
  domain: z.string().nullable(),
  template: z.string().nullable(),
  minCpuCount: z.number().int().nullable(),
  minMemoryMB: z.number().int().nullable(),
  updatedAt: z.date().nullable(),
});
export type E2bSettingsView = z.infer<typeof ZE2bSettingsView>;

/** The stored non-secret fields (a JSON column, validated again whenever it is read). */
export const ZStoredE2bFields = ZE2bTenantSettings.omit({ apiKey: true });
