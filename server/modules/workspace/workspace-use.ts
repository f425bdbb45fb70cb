import type { TenantScope } from "@/server/auth/scope";
import type { AgentDTO } from "@/server/modules/agent/agent.types";
import { isAppError } from "@/server/shared/errors";
import type { Workspace } from "@/server/workspace/workspace";
import {
  applyAgentDefaults,
  applyDefaultsOf,
  attachWorkspace,
  type AttachDeps,
  requireWorkspaceRecord,
} from "./workspace-attach";
import { assertMayActOnWorkspace } from "./workspace-access";
import { type BindingDeps, bindingForSession, bindSession, type SessionBinding } from "./workspace-binding";
import type { WorkspaceRecord } from "./workspace-lifecycle.data";
import { acquireLease, callLease, type LeaseDeps, type LeaseOptions, releaseLease } from "./workspace-lease";
import type { WorkspaceDTO } from "./workspace.types";

/** Everything using a workspace needs: attach, lease and bind (built once per process by the factory). */
export type WorkspaceUseDeps = AttachDeps & LeaseDeps & BindingDeps;

/** Work done on an attached workspace. */
type WorkspaceWork<T> = (workspace: Workspace, record: WorkspaceDTO) => Promise<T>;

/** Runs `fn` on the workspace while holding a lease (the sweeper never stops a leased workspace). */
export async function withLease<T>(
  deps: AttachDeps & LeaseDeps,
  scope: TenantScope,
  workspaceId: string,
  lease: LeaseOptions & { agentId?: string | null },
  fn: WorkspaceWork<T>,
): Promise<T> {
  await acquireLease(deps, scope, workspaceId, lease);
  try {
    const record = await requireWorkspaceRecord(scope, workspaceId, deps.db);
    const workspace = await attachWorkspace(deps, scope, record);
    const release = deps.engine.manager.pin(workspace);
    try {
      await applyAgentDefaults(deps, scope, workspace, lease.agentId ?? null);
      return await fn(workspace, record);
    } finally {
      release();
    }
  } finally {
    await endLease(deps, scope, workspaceId, lease);
  }
}

/** Releases a lease after use; a release that fails is retried until it lands (lease-release-retry.ts). */
async function endLease(deps: LeaseDeps, scope: TenantScope, workspaceId: string, lease: LeaseOptions) {
  const quiet = lease.quiet ?? false;
  const endedAt = new Date();
  await releaseLease(deps, scope, workspaceId, lease.holder, { quiet }).catch((error: unknown) => {
    deps.engine.log.warn(
      { err: error, workspaceId, holder: lease.holder },
      "releasing a lease failed; retrying",
    );
    deps.releaseRetry.schedule({ scope, workspaceId, holder: lease.holder, quiet, endedAt });
  });
}

/**
 * `withSessionWorkspace` for a caller that has read the session and its agent (a chat turn): the lease's
 * lock reads the workspace row and that is the record (no read before or after it; a cold workspace's
 * gate starts from it too), and the agent's stored defaults come from `agent`.
 */
export async function withWorkspaceOfSession<T>(
  deps: WorkspaceUseDeps,
  scope: TenantScope,
  of: { session: SessionBinding; agent: Pick<AgentDTO, "id" | "defaultMcpConfigs" | "defaultSkills"> },
  lease: LeaseOptions,
  fn: (workspace: Workspace, record: WorkspaceRecord) => Promise<T>,
): Promise<T> {
  const workspaceId = of.session.workspaceId;
  const leased = await acquireLease(deps, scope, workspaceId, lease).catch(async (error: unknown) => {
    if (!isAppError(error) || error.code !== "NOT_FOUND") throw error;
    // No record yet (session.create writes one; a session from before it did not): bind, then lease.
    await bindSession(deps, scope, of.session);
    return acquireLease(deps, scope, workspaceId, lease);
  });
  try {
    const workspace = await attachWorkspace(deps, scope, leased.record, leased.record);
    // The lease keeps the sweeper away; the pin keeps this process' idle eviction away for as long.
    const release = deps.engine.manager.pin(workspace);
    try {
      await applyDefaultsOf(deps, workspace, of.agent);
      return await fn(workspace, leased.record);
    } finally {
      release();
    }
  } finally {
    await endLease(deps, scope, workspaceId, lease);
  }
}

/**
 * The workspace of a session, initialised and attached (provisioned by the workers first when needed).
 * Use `withSessionWorkspace` instead when the work takes time: it holds a lease meanwhile.
 */
export async function resolveForSession(
  deps: AttachDeps & BindingDeps,
  scope: TenantScope,
  sessionId: string,
) {
  const { session, record } = await bindingForSession(deps, scope, sessionId);
  const workspace = await attachWorkspace(deps, scope, record);
  await applyAgentDefaults(deps, scope, workspace, session.agentId);
  return { session, record, workspace };
}

/**
 * Runs `fn` on the session's workspace under a lease (tool calls, scripts; a chat turn, which has read
 * the session and its agent already, uses `withWorkspaceOfSession`).
 */
export async function withSessionWorkspace<T>(
  deps: WorkspaceUseDeps,
  scope: TenantScope,
  sessionId: string,
  lease: LeaseOptions,
  fn: WorkspaceWork<T>,
): Promise<T> {
  const { session, record } = await bindingForSession(deps, scope, sessionId);
  return withLease(deps, scope, record.id, { ...lease, agentId: session.agentId }, fn);
}

/**
 * The record + an attached workspace, under a short call lease (routers' workspace calls and routes).
 * A member reaches only their own sessions' workspaces (workspace-access.ts), checked before the lease.
 */
export async function withWorkspace<T>(
  deps: AttachDeps & LeaseDeps,
  scope: TenantScope,
  workspaceId: string,
  reason: string,
  fn: WorkspaceWork<T>,
  /** `quiet` for reads: their call lease writes no ledger events. */
  options: { agentId?: string | null; quiet?: boolean } = {},
): Promise<T> {
  await assertMayActOnWorkspace(scope, await requireWorkspaceRecord(scope, workspaceId, deps.db), deps.db);
  const lease = { ...callLease(reason), quiet: options.quiet ?? false, agentId: options.agentId ?? null };
  return withLease(deps, scope, workspaceId, lease, fn);
}
