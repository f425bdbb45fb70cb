import { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import type { Db } from "@/server/db";
import type { DriverSet } from "@/server/engine/driver-set";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { AppError } from "@/server/shared/errors";
import { parseInput } from "@/server/shared/parse-input";
import type { BackendKind } from "@/server/workspace/drivers/port";
import {
  type BackendPreferences,
  readBackendPreferences,
  writeTenantDefaultBackend,
} from "./workspace-backend.data";
import { ZBackendKind } from "@/server/modules/agent/agent.types";

export const ZTenantBackendPatch = z.object({ defaultBackend: ZBackendKind.nullable() }).strict();

/** One backend this installation runs, as the API and the dashboard show it. */
export type BackendOptionDTO = {
  kind: BackendKind;
  /** The driver behind the kind (`local`, `host-unconfined`, `docker`, ...). */
  driver: string;
  /** How the dashboard names it (the driver definition's `label`). */
  label: string;
  summary: string;
  isolated: boolean;
  sandbox: string | null;
  pauseKeepsMemory: boolean;
};

/**
 * Which backend a workspace is created on: the agent's choice, else the tenant's default, else the
 * installation's (BERTH_WORKSPACE_BACKEND), and only among the backends the operator enabled
 * (BERTH_WORKSPACE_BACKENDS). A workspace keeps the backend it was created on.
 */
export function createBackendChoice(drivers: DriverSet, db: Db, audit: AuditRecorder) {
  function optionOf(kind: BackendKind): BackendOptionDTO {
    const driver = drivers.forKind(kind);
    const definition = drivers.definitionOf(kind);
    return {
      kind,
      driver: driver.name,
      label: definition?.label ?? kind,
      summary: definition?.summary ?? "",
      isolated: driver.isolation.isolated,
      sandbox: driver.isolation.sandbox,
      pauseKeepsMemory: driver.capabilities.pauseKeepsMemory,
    };
  }

  function requireEnabled(kind: BackendKind, chosenBy: string): BackendKind {
    if (drivers.find(kind)) return kind;
    throw new AppError("UNPROCESSABLE", `${chosenBy} chooses the ${kind} backend, which is not enabled`, {
      userMessage: `The ${kind} backend is not enabled on this installation (${chosenBy}); choose one of: ${drivers.all.map((driver) => driver.kind).join(", ")}.`,
      details: { reason: "backend_not_enabled", backend: kind, chosenBy },
    });
  }

  function kindFrom(preferences: BackendPreferences): BackendKind {
    if (preferences.agent) return requireEnabled(preferences.agent, "its agent");
    if (preferences.tenant) return requireEnabled(preferences.tenant, "the tenant default");
    return drivers.default.kind;
  }

  return {
    /** The backends tenants and agents may choose, the installation's and the tenant's defaults. */
    async options(scope: TenantScope) {
      assertCan(scope, "tenant:read");
      const preferences = await readBackendPreferences(scope, null, db);
      return {
        available: drivers.all.map((driver) => optionOf(driver.kind)),
        installationDefault: drivers.default.kind,
        tenantDefault: preferences.tenant,
      };
    },

    /** Sets (or, with null, clears) the tenant's default backend; audited. */
    async setTenantDefault(scope: TenantScope, raw: z.input<typeof ZTenantBackendPatch>) {
      assertCan(scope, "tenant:manage");
      const { defaultBackend } = parseInput(ZTenantBackendPatch, raw);
      if (defaultBackend) requireEnabled(defaultBackend, "the tenant default");
      await writeTenantDefaultBackend(scope, defaultBackend, db);
      await audit.record(scope, {
        action: "tenant.backend.update",
        targetType: "tenant",
        targetId: scope.tenantId,
        outcome: "success",
        details: { defaultBackend },
      });
      return this.options(scope);
    },

    /** Refuses an agent's choice this installation cannot honour (agent create and update). */
    assertChoosable(kind: string | null | undefined): void {
      if (kind) requireEnabled(ZBackendKind.parse(kind), "the agent");
    },

    /** The backend a new workspace of `agentId` is created on. */
    async kindFor(scope: TenantScope, agentId: string | null): Promise<BackendKind> {
      return kindFrom(await readBackendPreferences(scope, agentId, db));
    },

    /** The same choice from preferences the caller already read (session.create reads them with the agent). */
    kindFrom,
  };
}
