import type { TenantScope } from "@/server/auth/scope";
import { AppError } from "@/server/shared/errors";
import type { IsolationPolicy as StoredIsolationPolicy } from "@/server/modules/agent/agent.types";
import type { WorkspaceDTO } from "@/server/modules/workspace/workspace.types";
import {
  assignWorkspaceId,
  isolationOfStored,
  legacyPerUserWorkspaceId,
} from "@/server/workspace/manager/isolation";

/**
 * The installation's default when neither the agent nor its tenant names a policy (agentscope-spec.md §8.1:
 * PER_AGENT). Sessions resolve the tenant's own default first (tenant-policy.ts tenantDefaultIsolation).
 */
export const TENANT_DEFAULT_ISOLATION: StoredIsolationPolicy = "PER_AGENT";

/** The user a workspace id is derived for: the signed-in user, else the API key (its own "user"). */
export function workspaceUserOf(scope: TenantScope): string {
  return scope.userId ?? `api_key:${scope.apiKeyId ?? "system"}`;
}

export function assignSessionWorkspaceId(
  policy: StoredIsolationPolicy,
  scope: TenantScope,
  agentId: string,
): string {
  return assignWorkspaceId(isolationOfStored(policy), {
    tenantId: scope.tenantId,
    userId: workspaceUserOf(scope),
    agentId,
  });
}

/** The id a PER_USER binding had before tenants were part of it (reused when the tenant holds it). */
export function legacySessionWorkspaceId(policy: StoredIsolationPolicy, scope: TenantScope): string | null {
  return policy === "PER_USER" ? legacyPerUserWorkspaceId(workspaceUserOf(scope)) : null;
}

/** Why an explicitly requested workspace cannot take a new session (null: it can). */
export type WorkspaceRefusal = "not_found" | "other_user" | "per_session";

/**
 * Whether a caller may bind a new session to an existing workspace (the tenant filter already held: the
 * record was read through the caller's scope). Every isolation policy keys workspaces on a user, so another
 * user's workspace is never shared; PER_SESSION workspaces belong to the one session that minted them. A
 * purged workspace may be shared: its next use provisions a fresh generation of it.
 */
export function workspaceRefusal(record: WorkspaceDTO | null, scope: TenantScope): WorkspaceRefusal | null {
  if (!record) return "not_found";
  if (record.isolationPolicy === "PER_SESSION") return "per_session";
  if (record.userId !== null && record.userId !== workspaceUserOf(scope)) return "other_user";
  return null;
}

export function mayShareWorkspace(record: WorkspaceDTO | null, scope: TenantScope): record is WorkspaceDTO {
  return workspaceRefusal(record, scope) === null;
}

const REFUSALS: Record<WorkspaceRefusal, { code: "NOT_FOUND" | "FORBIDDEN" | "CONFLICT"; text: string }> = {
  not_found: { code: "NOT_FOUND", text: "does not exist" },
  other_user: { code: "FORBIDDEN", text: "belongs to another user" },
  per_session: { code: "CONFLICT", text: "is private to the session it was made for (PER_SESSION)" },
};

/**
 * The typed error for an explicit `workspaceId` that cannot be used: the caller asked for that workspace,
 * so quietly binding the session somewhere else would be wrong. Another tenant's workspace reads as
 * not_found (the tenant filter hides it).
 */
export function workspaceRefusalError(workspaceId: string, reason: WorkspaceRefusal): AppError {
  const { code, text } = REFUSALS[reason];
  return new AppError(code, `requested workspace ${workspaceId} ${text}`, {
    userMessage: `Workspace ${workspaceId} ${text}; omit workspaceId to use the agent's own workspace.`,
    details: { workspaceId, reason },
  });
}
