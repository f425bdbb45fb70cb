import type { TenantScope } from "@/server/auth/scope";
import type { Db } from "@/server/db";
import type { QuotaDeps } from "@/server/modules/quota/quota.service";
import { getAgentOrNull } from "@/server/modules/agent/agent.data";
import { getSession } from "@/server/modules/session/session.data";
import type { SessionDTO } from "@/server/modules/session/session.types";
import { tenantDefaultIsolation } from "@/server/modules/tenant/tenant-policy";
import { announceWorkspaceCreated, type LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import { getWorkspaceOrNull, upsertWorkspaceBinding } from "./workspace.data";
import type { BackendPreferences } from "./workspace-backend.data";
import type { createBackendChoice } from "./workspace-backend.service";
import type { WorkspaceDTO } from "./workspace.types";

type IsolationPolicy = "PER_AGENT" | "PER_SESSION" | "PER_USER";

/** The backend choice a binding asks (workspace-backend.service.ts). */
export type BindingBackends = Pick<ReturnType<typeof createBackendChoice>, "kindFor" | "kindFrom">;

export type BindingDeps = {
  backends: BindingBackends;
  /** The process' database client (the Berth root's). */
  db: Db;
  /** The installation's quota configuration (a new record counts against `totalWorkspaces`). */
  quota: () => Pick<QuotaDeps, "config">;
  /** Announces `workspace.created` to the tenant's webhooks (the root's `berth.lifecycle`). */
  lifecycle: LifecycleEvents;
  /** One insert per workspace per process, however many requests race for it (see bindingForSession). */
  bindingsInFlight: Map<string, Promise<WorkspaceDTO>>;
};

/** The session's workspace record, created (PENDING) on first use under the agent's isolation policy. */
export async function bindingForSession(deps: BindingDeps, scope: TenantScope, sessionId: string) {
  const session = await getSession(scope, sessionId, deps.db);
  const existing = await getWorkspaceOrNull(scope, session.workspaceId, deps.db);
  if (existing) return { session, record: existing };
  return { session, record: await bindSession(deps, scope, session) };
}

/** What of a session its workspace binding needs. */
export type SessionBinding = Pick<SessionDTO, "workspaceId" | "agentId" | "userId">;

/** Creates the session's workspace record (PENDING), once per process however many requests race. */
export async function bindSession(
  deps: BindingDeps,
  scope: TenantScope,
  session: SessionBinding,
): Promise<WorkspaceDTO> {
  // One insert per workspace per process however many requests race for it (a burst of interactive
  // transactions would exhaust the pool); the unique id settles races between processes.
  const key = `${scope.tenantId}\0${session.workspaceId}`;
  let pending = deps.bindingsInFlight.get(key);
  if (!pending) {
    pending = (async () => {
      const agent = await getAgentOrNull(scope, session.agentId, deps.db);
      const { workspace, created } = await upsertWorkspaceBinding(
        scope,
        {
          id: session.workspaceId,
          backendKind: await deps.backends.kindFor(scope, session.agentId),
          isolationPolicy: agent?.isolationPolicy ?? (await tenantDefaultIsolation(scope, deps.db)),
          agentId: session.agentId,
          userId: session.userId ?? scope.userId,
        },
        deps.quota(),
        deps.db,
      );
      if (created) announceWorkspaceCreated(deps.lifecycle, scope.tenantId, workspace);
      return workspace;
    })().finally(() => deps.bindingsInFlight.delete(key));
    deps.bindingsInFlight.set(key, pending);
  }
  return pending;
}

/**
 * The binding row (PENDING, on the backend the agent, the tenant or the installation chooses) that
 * session.create writes with a new session; it read the backend preferences with the agent.
 */
export function bindingFor(
  backends: Pick<BindingBackends, "kindFrom">,
  input: {
    workspaceId: string;
    agentId: string;
    userId: string | null;
    isolationPolicy: IsolationPolicy;
    backendPreferences: BackendPreferences;
  },
) {
  return {
    id: input.workspaceId,
    backendKind: backends.kindFrom(input.backendPreferences),
    isolationPolicy: input.isolationPolicy,
    agentId: input.agentId,
    userId: input.userId,
  };
}

/** Records a workspace binding (PENDING) without provisioning. */
export async function bindWorkspace(
  deps: Pick<BindingDeps, "db" | "quota" | "lifecycle"> & { backends: Pick<BindingBackends, "kindFor"> },
  scope: TenantScope,
  input: {
    workspaceId: string;
    agentId: string;
    userId: string | null;
    isolationPolicy: IsolationPolicy;
  },
): Promise<WorkspaceDTO> {
  const { workspace, created } = await upsertWorkspaceBinding(
    scope,
    {
      id: input.workspaceId,
      backendKind: await deps.backends.kindFor(scope, input.agentId),
      isolationPolicy: input.isolationPolicy,
      agentId: input.agentId,
      userId: input.userId,
    },
    deps.quota(),
    deps.db,
  );
  if (created) announceWorkspaceCreated(deps.lifecycle, scope.tenantId, workspace);
  return workspace;
}
