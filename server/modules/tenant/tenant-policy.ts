import { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import { isRoleAtLeast } from "@/server/auth/roles";
import type { TenantScope } from "@/server/auth/scope";
import type { DbClient } from "@/server/db";
import { type IsolationPolicy, ZIsolationPolicy } from "@/server/modules/agent/agent.types";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import { AppError } from "@/server/shared/errors";
import { parseInput } from "@/server/shared/parse-input";
import { getTenantPolicy, updateTenantPolicy } from "./tenant-policy.data";
import { type TenantPolicyDTO, ZTenantPolicyDTO } from "./tenant-policy.types";

/** The isolation policy of an agent that names none, in a tenant that names none (agentscope-spec.md §8.1). */
const INSTALLATION_DEFAULT_ISOLATION: IsolationPolicy = "PER_AGENT";

/** The shortest idle TTL a tenant may set: a sweep stops a workspace no sooner than this after its last use. */
export const MIN_TENANT_IDLE_TTL_MS = 60_000;

/** What the operator's configuration allows, next to the tenant's choice (the installation's values). */
const ZOperatorLimits = z.object({
  /** BERTH_WORKSPACE_IDLE_TTL_MS: the installation's idle TTL, the most a tenant may set. */
  idleTtlMs: z.number().int().positive(),
  minIdleTtlMs: z.number().int().positive(),
});
export type OperatorLimits = z.infer<typeof ZOperatorLimits>;

/** `tenant.policy`'s answer: the stored policy, what the operator allows, and what applies. */
export const ZTenantPolicyView = ZTenantPolicyDTO.extend({
  operator: ZOperatorLimits,
  effective: z.object({ isolationPolicy: ZIsolationPolicy, idleTtlMs: z.number().int().positive() }),
});
export type TenantPolicyView = z.infer<typeof ZTenantPolicyView>;

export const ZTenantPolicyPatch = z
  .object({
    stdioMcpMinRole: z.enum(["owner", "admin", "member"]).optional(),
    /** Null: back to PER_AGENT. */
    defaultIsolationPolicy: ZIsolationPolicy.nullable().optional(),
    /** Null: the installation's TTL. At least a minute, at most the installation's TTL. */
    workspaceIdleTtlMs: z.number().int().min(MIN_TENANT_IDLE_TTL_MS).nullable().optional(),
    /** Null: the defaults. Each workspace keeps at least its newest checkpoint. */
    checkpointKeepTurns: z.number().int().min(1).max(10_000).nullable().optional(),
    checkpointKeepDays: z.number().int().min(1).max(3_650).nullable().optional(),
    /** Null: no cap. At least 1 MiB. */
    checkpointStorageBytes: z
      .number()
      .int()
      .min(1_048_576)
      .max(Number.MAX_SAFE_INTEGER)
      .nullable()
      .optional(),
  })
  .strict();

/** The idle TTL that applies to a tenant's workspaces: its own when shorter than the installation's. */
export function effectiveIdleTtlMs(tenantTtlMs: number | null, installationTtlMs: number): number {
  return tenantTtlMs === null ? installationTtlMs : Math.min(tenantTtlMs, installationTtlMs);
}

export function viewTenantPolicy(policy: TenantPolicyDTO, installationTtlMs: number): TenantPolicyView {
  return {
    ...policy,
    operator: { idleTtlMs: installationTtlMs, minIdleTtlMs: MIN_TENANT_IDLE_TTL_MS },
    effective: {
      isolationPolicy: effectiveDefaultIsolation(policy.defaultIsolationPolicy),
      idleTtlMs: effectiveIdleTtlMs(policy.workspaceIdleTtlMs, installationTtlMs),
    },
  };
}

export async function readTenantPolicy(scope: TenantScope, db: DbClient): Promise<TenantPolicyDTO> {
  assertCan(scope, "tenant:read");
  return getTenantPolicy(scope, db);
}

/** The isolation policy a session of an agent without its own gets: the tenant's default, else PER_AGENT. */
export async function tenantDefaultIsolation(scope: TenantScope, db: DbClient): Promise<IsolationPolicy> {
  return effectiveDefaultIsolation((await getTenantPolicy(scope, db)).defaultIsolationPolicy);
}

/** The same from a tenant default the caller already read (null: the tenant names none). */
export function effectiveDefaultIsolation(tenantDefault: IsolationPolicy | null): IsolationPolicy {
  return tenantDefault ?? INSTALLATION_DEFAULT_ISOLATION;
}

/**
 * Owners only. `operator` bounds the idle TTL (a tenant cannot keep workspaces longer than the installation
 * does); it must be given whenever the patch sets one.
 */
export async function changeTenantPolicy(
  scope: TenantScope,
  raw: z.input<typeof ZTenantPolicyPatch>,
  operator: OperatorLimits | undefined,
  /** Where the change is audited (the root's `berth.audit`). */
  audit: AuditRecorder,
  db: DbClient,
): Promise<TenantPolicyDTO> {
  assertCan(scope, "tenant:manage");
  const patch = parseInput(ZTenantPolicyPatch, raw);
  const ttl = patch.workspaceIdleTtlMs;
  if (ttl !== undefined && ttl !== null) {
    if (!operator)
      throw new AppError("INTERNAL", "changeTenantPolicy: an idle TTL needs the operator limits");
    if (ttl > operator.idleTtlMs) {
      throw new AppError(
        "BAD_REQUEST",
        `idle TTL ${ttl} ms above the installation's ${operator.idleTtlMs} ms`,
        {
          userMessage: `workspaceIdleTtlMs: must be at most ${operator.idleTtlMs} ms (the installation's BERTH_WORKSPACE_IDLE_TTL_MS)`,
          details: {
            issues: [
              {
                path: "workspaceIdleTtlMs",
                message: `must be at most ${operator.idleTtlMs} ms (${operator.idleTtlMs / 60_000} min), the installation's idle TTL`,
              },
            ],
          },
        },
      );
    }
  }
  const policy = await updateTenantPolicy(scope, patch, db);
  await audit.record(scope, {
    action: "tenant.policy.update",
    targetType: "tenant",
    targetId: scope.tenantId,
    outcome: "success",
    details: { ...policy, changed: Object.keys(patch) },
  });
  return policy;
}

/** Throws FORBIDDEN (before anything is spawned) unless the tenant lets the caller's role declare stdio MCPs. */
export async function assertMayDeclareStdioMcp(scope: TenantScope, db: DbClient): Promise<void> {
  const { stdioMcpMinRole } = await getTenantPolicy(scope, db);
  if (isRoleAtLeast(scope.role, stdioMcpMinRole)) return;
  throw new AppError("FORBIDDEN", `role ${scope.role} may not declare stdio MCP servers`, {
    userMessage: `Only ${stdioMcpMinRole}s and above may add stdio MCP servers in this tenant (an owner can change this policy).`,
    details: { reason: "stdio_mcp_policy", required: stdioMcpMinRole, role: scope.role },
  });
}
