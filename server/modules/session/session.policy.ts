import type { TenantScope } from "@/server/auth/scope";
import type { IsolationPolicy as StoredIsolationPolicy } from "@/server/modules/agent/agent.types";
import type { WorkspaceDTO } from "@/server/modules/workspace/workspace.types";
import { assignWorkspaceId, IsolationPolicy } from "@/server/workspace/manager/isolation";

/** The tenant default when an agent names no policy (agentscope-spec.md §8.1: PER_AGENT). */
export const TENANT_DEFAULT_ISOLATION: StoredIsolationPolicy = "PER_AGENT";

const ENGINE_POLICY: Record<StoredIsolationPolicy, IsolationPolicy> = {
  PER_AGENT: IsolationPolicy.PER_AGENT,
  PER_SESSION: IsolationPolicy.PER_SESSION,
  PER_USER: IsolationPolicy.PER_USER,
};

/** The user a workspace id is derived for: the signed-in user, else the API key (its own "user"). */
export function workspaceUserOf(scope: TenantScope): string {
  return scope.userId ?? `api_key:${scope.apiKeyId ?? "system"}`;
}

export function assignSessionWorkspaceId(
  policy: StoredIsolationPolicy,
  scope: TenantScope,
  agentId: string,
): string {
  return assignWorkspaceId(ENGINE_POLICY[policy], { userId: workspaceUserOf(scope), agentId });
}

/**
 * Whether a caller may bind a new session to an existing workspace (the tenant filter already held: the
 * record was read through the caller's scope). Every isolation policy keys workspaces on a user, so another
 * user's workspace is never shared; PER_SESSION workspaces belong to the one session that minted them. A
 * purged workspace may be shared: its next use provisions a fresh generation of it.
 */
export function mayShareWorkspace(record: WorkspaceDTO | null, scope: TenantScope): record is WorkspaceDTO {
  if (!record) return false;
  if (record.isolationPolicy === "PER_SESSION") return false;
  return record.userId === null || record.userId === workspaceUserOf(scope);
}
