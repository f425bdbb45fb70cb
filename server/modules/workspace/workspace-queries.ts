import type { TenantScope } from "@/server/auth/scope";
import type { Db } from "@/server/db";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { auditActorNames } from "@/server/modules/audit/audit.data";
import { effectiveIdleTtlMs } from "@/server/modules/tenant/tenant-policy";
import { listWorkspaceEvents, listWorkspaceLeases, pageWorkspaceEvents } from "./workspace.data";
import { listWorkspaces, type WorkspaceListFilters } from "./workspace-list.data";
import { TRANSITION_EVENT_KINDS, type WorkspaceDTO, type WorkspaceEventKind } from "./workspace.types";
import { assertMayActOnWorkspace, workspaceListLimit } from "./workspace-access";
import { requireWorkspaceRecord } from "./workspace-attach";
import { readWorkspacePageContext } from "./workspace-context.data";
import { explainLiveness } from "./workspace-liveness";

/** The engine's parts the workspace pages read (its drivers: isolation, terminal; its TTLs), and the database. */
type QueryDeps = Pick<WorkspaceEngine, "drivers" | "config"> & { db: Db };

/** The workspaces the caller may list, a page at a time, each described for the dashboard. */
export async function listWorkspacesFor(
  deps: Pick<QueryDeps, "drivers" | "db">,
  scope: TenantScope,
  options: WorkspaceListFilters & { limit?: number; cursor?: string },
) {
  const page = await listWorkspaces(
    scope,
    { ...options, onlyAccessible: await workspaceListLimit(scope, deps.db) },
    deps.db,
  );
  return { ...page, items: page.items.map((record) => describeWorkspace(deps, record)) };
}

/** The workspace page: the record described, its agent, leases, liveness, newest events, last transition. */
export async function getWorkspaceDetail(deps: QueryDeps, scope: TenantScope, workspaceId: string) {
  const { db } = deps;
  const record = await requireWorkspaceRecord(scope, workspaceId, db);
  await assertMayActOnWorkspace(scope, record, db);
  const [leases, { events, lastTransition }, context] = await Promise.all([
    listWorkspaceLeases(scope, workspaceId, db),
    recentEventsAndLastTransition(scope, workspaceId, db),
    readWorkspacePageContext(scope, record.agentId, db),
  ]);
  return {
    ...describeWorkspace(deps, record),
    agentName: context.agentName,
    leases,
    liveness: explainLiveness(record, leases, {
      idleTtlMs: effectiveIdleTtlMs(context.tenantIdleTtlMs, deps.config.idleTtlMs),
      maxLeaseMs: deps.config.maxLeaseMs,
    }),
    events,
    lastTransition,
  };
}

/** The workspace's ledger, newest first, a page at a time, optionally only some kinds of events. */
export async function pageWorkspaceEventsFor(
  deps: Pick<QueryDeps, "db">,
  scope: TenantScope,
  workspaceId: string,
  options: { kinds?: WorkspaceEventKind[]; limit?: number; cursor?: string },
) {
  const { db } = deps;
  await assertMayActOnWorkspace(scope, await requireWorkspaceRecord(scope, workspaceId, db), db);
  const page = await pageWorkspaceEvents(scope, workspaceId, options, db);
  // Actors as people read them ("user:<id>" → the email, "api_key:<id>" → the key's name).
  const names = await auditActorNames(
    scope,
    page.items.flatMap((event) => {
      const [type, ...id] = event.actor.split(":");
      return type === "user" || type === "api_key" ? [{ type, id: id.join(":") }] : [];
    }),
    db,
  );
  return {
    ...page,
    items: page.items.map((event) => ({ ...event, actorName: names.get(event.actor) ?? null })),
  };
}

/**
 * How this installation confines workspaces by default (the dashboard warns when it does not), and
 * every backend it runs.
 */
export function describeBackends(engine: Pick<WorkspaceEngine, "drivers">) {
  return {
    backend: engine.drivers.default.name,
    ...engine.drivers.default.isolation,
    backends: engine.drivers.all.map((driver) => ({
      kind: driver.kind,
      backend: driver.name,
      ...driver.isolation,
    })),
  };
}

/**
 * The workspace page's 50 newest events, and why it is in its state (its newest transition, however many
 * lease events came after it): found among those 50 when it is one of them, else read on its own.
 */
async function recentEventsAndLastTransition(scope: TenantScope, workspaceId: string, db: Db) {
  const page = await pageWorkspaceEvents(scope, workspaceId, { limit: 50 }, db);
  const transitionKinds = new Set<WorkspaceEventKind>(TRANSITION_EVENT_KINDS);
  const seen = page.items.find((event) => transitionKinds.has(event.kind));
  // Every event is on the page when there is no next one: no transition among them means none at all.
  if (seen || page.nextCursor === null) return { events: page.items, lastTransition: seen ?? null };
  const [older] = await listWorkspaceEvents(
    scope,
    workspaceId,
    { limit: 1, kinds: [...TRANSITION_EVENT_KINDS] },
    db,
  );
  return { events: page.items, lastTransition: older ?? null };
}

/**
 * What confines the record's workspace: the driver of its backend; a record left on a backend this
 * installation no longer runs is not claimed to be isolated.
 */
function isolationOf(engine: Pick<WorkspaceEngine, "drivers">, record: WorkspaceDTO) {
  const driver = engine.drivers.find(record.backendKind);
  const isolated = driver?.isolation.isolated ?? false;
  return {
    backend: driver?.name ?? record.backendKind,
    isolated,
    // host-unconfined runs agent commands on the host with Berth's privileges.
    trustedOnly: !isolated,
    // The backend offers a dashboard terminal (a PTY in the workspace's confinement).
    terminal: driver?.capabilities.pty ?? false,
  };
}

/** The record as the dashboard shows it: no backend handle, its confinement, how long it has idled. */
function describeWorkspace<R extends WorkspaceDTO>(engine: Pick<WorkspaceEngine, "drivers">, record: R) {
  const { backendHandle: _handle, ...rest } = record;
  return {
    ...rest,
    ...isolationOf(engine, record),
    idleMs: record.lastActivityAt ? Math.max(0, Date.now() - record.lastActivityAt.getTime()) : null,
  };
}
