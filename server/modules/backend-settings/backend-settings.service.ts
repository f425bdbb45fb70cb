import type { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { decryptSecret, encryptSecret, type SecretKey } from "@/server/auth/secrets";
import { recordAudit } from "@/server/modules/audit/audit-buffer.service";
import { AppError } from "@/server/shared/errors";
import { parseInput } from "@/server/shared/parse-input";
import type { TenantDriverSettings } from "@/server/workspace/backend/driver";
import {
  type BackendSettingsRow,
  deleteBackendSettings,
  findBackendSettings,
  tenantsWithBackendSettings,
  upsertBackendSettings,
} from "./backend-settings.data";
import { type E2bSettingsView, ZE2bSettingsPatch, ZStoredE2bFields } from "./backend-settings.types";

/** The tenant and backend are the sealed key's authenticated data: a row copied to another tenant fails. */
const sealingContext = (tenantId: string) => `tenant-backend:${tenantId}:e2b`;

const hintOf = (secret: string) => `…${secret.slice(-4)}`;

function storedFields(row: BackendSettingsRow | null): z.infer<typeof ZStoredE2bFields> {
  const parsed = ZStoredE2bFields.safeParse(row?.settings ?? {});
  if (parsed.success) return parsed.data;
  throw new AppError("INTERNAL", "stored E2B settings do not validate", {
    details: { issues: parsed.error.issues.map((issue) => issue.path.join(".")) },
  });
}

function view(row: BackendSettingsRow | null): E2bSettingsView {
  const fields = storedFields(row);
  return {
    configured: row !== null,
    apiKeyHint: row?.secretHint ?? null,
    domain: fields.domain ?? null,
    template: fields.template ?? null,
    minCpuCount: fields.minCpuCount ?? null,
    minMemoryMB: fields.minMemoryMB ?? null,
    updatedAt: row?.updatedAt ?? null,
  };
}

/**
 * A tenant's own E2B team (issue 13): its API key (sealed with BERTH_ENCRYPTION_KEY), domain, template and
 * minimum size, used by the E2B driver for the tenant's workspaces instead of the installation's. Admins
 * read and change them; every change is audited without the key.
 */
export function createBackendSettingsService(deps: { secretKey: SecretKey }) {
  return {
    async readE2b(scope: TenantScope): Promise<E2bSettingsView> {
      assertCan(scope, "workspace:manage");
      return view(await findBackendSettings(scope.tenantId, "e2b"));
    },

    async setE2b(scope: TenantScope, raw: z.input<typeof ZE2bSettingsPatch>): Promise<E2bSettingsView> {
      assertCan(scope, "workspace:manage");
      const patch = parseInput(ZE2bSettingsPatch, raw);
      const before = await findBackendSettings(scope.tenantId, "e2b");
      const { apiKey, ...rest } = patch;
      const fields: Record<string, unknown> = { ...storedFields(before) };
      for (const [name, value] of Object.entries(rest)) {
        if (value === null) delete fields[name];
        else if (value !== undefined) fields[name] = value;
      }
      const settings = ZStoredE2bFields.parse(fields);
      const secret =
        apiKey === undefined
          ? { secretSealed: before?.secretSealed ?? null, secretHint: before?.secretHint ?? null }
          : apiKey === null
            ? { secretSealed: null, secretHint: null }
            : {
                secretSealed: encryptSecret(deps.secretKey, apiKey, sealingContext(scope.tenantId)),
                secretHint: hintOf(apiKey),
              };
      const row = await upsertBackendSettings(scope, "e2b", { settings, ...secret });
      await recordAudit(scope, {
        action: "tenant.backend-settings.update",
        targetType: "tenant",
        targetId: scope.tenantId,
        outcome: "success",
        details: {
          backend: "e2b",
          changed: Object.keys(patch),
          settings,
          apiKey: apiKey === undefined ? "kept" : apiKey === null ? "removed" : `set ${secret.secretHint}`,
        },
      });
      return view(row);
    },

    /** Back to the installation's E2B team for this tenant's new provisions. */
    async clearE2b(scope: TenantScope): Promise<E2bSettingsView> {
      assertCan(scope, "workspace:manage");
      const removed = await deleteBackendSettings(scope, "e2b");
      if (removed) {
        await recordAudit(scope, {
          action: "tenant.backend-settings.clear",
          targetType: "tenant",
          targetId: scope.tenantId,
          outcome: "success",
          details: { backend: "e2b" },
        });
      }
      return view(null);
    },
  };
}

export type BackendSettingsService = ReturnType<typeof createBackendSettingsService>;

/** What the drivers read (the composition passes it in): a tenant's E2B settings with the key unsealed. */
export function tenantDriverSettings(secretKey: SecretKey): TenantDriverSettings {
  return {
    async forTenant(backend, tenantId) {
      if (backend !== "e2b") return null;
      const row = await findBackendSettings(tenantId, "e2b");
      if (!row) return null;
      const fields: Record<string, unknown> = { ...storedFields(row) };
      if (row.secretSealed)
        fields.apiKey = decryptSecret(secretKey, row.secretSealed, sealingContext(tenantId));
      return fields;
    },
    tenants: (backend) => (backend === "e2b" ? tenantsWithBackendSettings("e2b") : Promise.resolve([])),
  };
}
