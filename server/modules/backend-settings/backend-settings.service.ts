import type { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { decryptSecret, encryptSecret, type SecretKey } from "@/server/auth/secrets";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { AppError } from "@/server/shared/errors";
import { parseInput } from "@/server/shared/parse-input";
import type { TenantDriverSettings } from "@/server/workspace/drivers/driver";
import { DRIVERS, type DriverRegistry } from "@/server/workspace/drivers/registry";
import {
  type BackendSettingsRow,
  deleteBackendSettings,
  findBackendSettings,
  tenantsWithBackendSettings,
  upsertBackendSettings,
} from "./backend-settings.data";
import {
  fieldsOf,
  requireSettingsOf,
  type SettingsOfBackend,
  settingsOf,
} from "./backend-settings-declarations";
import type {
  BackendSettingsForm,
  BackendSettingsView,
  ZBackendSettingsPatch,
} from "./backend-settings.types";
import type { Db } from "@/server/db";

/** The tenant and backend are the sealed key's authenticated data: a row copied to another tenant fails. */
const sealingContext = (tenantId: string, backend: string) => `tenant-backend:${tenantId}:${backend}`;

const hintOf = (secret: string) => `…${secret.slice(-4)}`;

function storedFields(settings: SettingsOfBackend, row: BackendSettingsRow | null): Record<string, unknown> {
  const parsed = settings.stored.safeParse(row?.settings ?? {});
  if (parsed.success) return parsed.data;
  throw new AppError("INTERNAL", `stored ${settings.backend} settings do not validate`, {
    details: { issues: parsed.error.issues.map((issue) => issue.path.join(".")) },
  });
}

function view(settings: SettingsOfBackend, row: BackendSettingsRow | null): BackendSettingsView {
  const fields = storedFields(settings, row);
  const values: BackendSettingsView["values"] = {};
  for (const name of Object.keys(settings.stored.shape)) {
    const value = fields[name];
    values[name] = typeof value === "string" || typeof value === "number" ? value : null;
  }
  return {
    backend: settings.backend,
    configured: row !== null,
    secretHint: row?.secretHint ?? null,
    values,
    updatedAt: row?.updatedAt ?? null,
  };
}

/**
 * A tenant's own settings of a workspace backend (issue 13: its E2B team), for every backend whose driver
 * declares some (`DriverDefinition.tenantSettings`): the secret field sealed with BERTH_ENCRYPTION_KEY, the
 * others validated by the driver's schema, used by the driver for the tenant's workspaces instead of the
 * installation's. Admins read and change them; every change is audited without the secret.
 */
export function createBackendSettingsService(deps: {
  /** The process' database client (the Berth root's). */
  db: Db;
  secretKey: SecretKey;
  /** Where the declarations come from (default: DRIVERS). */
  registry?: DriverRegistry;
  /** The kinds this installation runs (the settings page lists their forms). Absent: every declared one. */
  enabledKinds?: () => readonly string[];
  /** Where changes are audited (the root's `berth.audit`). */
  audit: AuditRecorder;
}) {
  const { db } = deps;
  const declared = (backend: string) => requireSettingsOf(backend, deps.registry);
  return {
    /** The backends of this installation that take tenant settings, each with its fields and values. */
    async forms(scope: TenantScope): Promise<BackendSettingsForm[]> {
      assertCan(scope, "workspace:manage");
      const kinds = deps.enabledKinds?.() ?? Object.values(deps.registry ?? DRIVERS).map((each) => each.kind);
      const forms: BackendSettingsForm[] = [];
      for (const backend of new Set(kinds)) {
        const settings = settingsOf(backend, deps.registry);
        if (!settings) continue;
        forms.push({
          backend,
          label: settings.label,
          title: settings.declaration.title,
          description: settings.declaration.description,
          fields: fieldsOf(settings),
          current: view(settings, await findBackendSettings(scope.tenantId, backend, db)),
        });
      }
      return forms;
    },

    async read(scope: TenantScope, backend: string): Promise<BackendSettingsView> {
      assertCan(scope, "workspace:manage");
      const settings = declared(backend);
      return view(settings, await findBackendSettings(scope.tenantId, backend, db));
    },

    /** Absent fields keep their values; null puts one back to the installation's. */
    async set(scope: TenantScope, raw: z.input<typeof ZBackendSettingsPatch>): Promise<BackendSettingsView> {
      assertCan(scope, "workspace:manage");
      const settings = declared(raw.backend);
      const { backend } = settings;
      const patch = parseInput(settings.patch, raw.settings);
      const secretField = settings.declaration.secretField;
      const before = await findBackendSettings(scope.tenantId, backend, db);
      const fields: Record<string, unknown> = { ...storedFields(settings, before) };
      for (const [name, value] of Object.entries(patch)) {
        if (name === secretField) continue;
        if (value === null) delete fields[name];
        else if (value !== undefined) fields[name] = value;
      }
      const stored = parseInput(settings.stored, fields);
      const secret =
        secretField === undefined ? undefined : (patch[secretField] as string | null | undefined);
      const sealed =
        secret === undefined
          ? { secretSealed: before?.secretSealed ?? null, secretHint: before?.secretHint ?? null }
          : secret === null
            ? { secretSealed: null, secretHint: null }
            : {
                secretSealed: encryptSecret(deps.secretKey, secret, sealingContext(scope.tenantId, backend)),
                secretHint: hintOf(secret),
              };
      const row = await upsertBackendSettings(scope, backend, { settings: stored, ...sealed }, db);
      await deps.audit.record(scope, {
        action: "tenant.backend-settings.update",
        targetType: "tenant",
        targetId: scope.tenantId,
        outcome: "success",
        details: {
          backend,
          changed: Object.keys(patch).filter((name) => patch[name] !== undefined),
          settings: stored,
          ...(secretField
            ? {
                [secretField]:
                  secret === undefined ? "kept" : secret === null ? "removed" : `set ${sealed.secretHint}`,
              }
            : {}),
        },
      });
      return view(settings, row);
    },

    /** Back to the installation's settings of `backend` for this tenant's new provisions. */
    async clear(scope: TenantScope, backend: string): Promise<BackendSettingsView> {
      assertCan(scope, "workspace:manage");
      const settings = declared(backend);
      const removed = await deleteBackendSettings(scope, backend, db);
      if (removed) {
        await deps.audit.record(scope, {
          action: "tenant.backend-settings.clear",
          targetType: "tenant",
          targetId: scope.tenantId,
          outcome: "success",
          details: { backend },
        });
      }
      return view(settings, null);
    },
  };
}

export type BackendSettingsService = ReturnType<typeof createBackendSettingsService>;

/**
 * What the drivers read (the composition passes it in): a tenant's settings of a backend that declares
 * some, with the secret unsealed.
 */
export function tenantDriverSettings(
  secretKey: SecretKey,
  db: Db,
  registry?: DriverRegistry,
): TenantDriverSettings {
  return {
    async forTenant(backend, tenantId) {
      const settings = settingsOf(backend, registry);
      if (!settings) return null;
      const row = await findBackendSettings(tenantId, backend, db);
      if (!row) return null;
      const fields: Record<string, unknown> = { ...storedFields(settings, row) };
      const secretField = settings.declaration.secretField;
      if (row.secretSealed && secretField) {
        fields[secretField] = decryptSecret(secretKey, row.secretSealed, sealingContext(tenantId, backend));
      }
      return fields;
    },
    tenants: (backend) =>
      settingsOf(backend, registry) ? tenantsWithBackendSettings(backend, db) : Promise.resolve([]),
  };
}
