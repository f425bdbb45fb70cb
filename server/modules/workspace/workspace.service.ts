import type { Db } from "@/server/db";
import type { AttachTracker } from "@/server/modules/metrics/attach-tracker";
import type { QuotaDeps } from "@/server/modules/quota/quota.service";
import type { AuditRecorder } from "@/server/modules/audit/audit-buffer.service";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { createEnqueue } from "@/server/queue/enqueue";
import { bindDeps } from "@/server/shared/bind-deps";
import { attachWorkspace, createAttachDeps } from "./workspace-attach";
import { bindingFor, bindWorkspace, type BindingDeps } from "./workspace-binding";
import { createBackendChoice } from "./workspace-backend.service";
import { acquireLease, callLease, createLeaseDeps, releaseLease } from "./workspace-lease";
import {
  describeBackends,
  getWorkspaceDetail,
  listWorkspacesFor,
  pageWorkspaceEventsFor,
} from "./workspace-queries";
import {
  auditWorkspaceChange,
  enqueueAgentPurge,
  enqueueSessionPurge,
  labelWorkspace,
  listPurgeReceiptsWithRequesters,
  requestBulk,
  requestPurge,
  requestStart,
  requestStop,
  type RequestDeps,
} from "./workspace-requests";
import {
  resolveForSession,
  withLease,
  withSessionWorkspace,
  withWorkspace,
  withWorkspaceOfSession,
  type WorkspaceUseDeps,
} from "./workspace-use";

export type { LeaseOptions } from "./workspace-lease";

/**
 * The workspace service: the ONE way API code (routers, chat, team tools, route handlers) reaches a
 * workspace. Every call resolves through the process' WorkspaceManager with the session's stored workspace
 * id; a miss waits for the workers to provision (see RecordAttacher), a stopped workspace comes back
 * transparently. Build one per process with `createWorkspaceService(berth.engine, { db: berth.db })` (the root does: server/composition/berth.ts).
 *
 * Each use case is a named function taking its dependencies (workspace-use.ts: attach under a lease;
 * workspace-binding.ts; workspace-queries.ts: the pages' reads; workspace-requests.ts: stop, start, purge,
 * label, bulk); this factory builds the process' dependencies once (single flights, the lease release
 * retry) and hands them to each.
 * `leaseOwnerId`: this process' liveness id (server/queue/heartbeat.ts, group `holders`), written on every
 * lease it takes, so the leases of a process that died are released as soon as its heartbeat stops.
 */
export function createWorkspaceService(
  engine: WorkspaceEngine,
  options: {
    db: Db;
    /** The root's attach tracker (stage timings of attaches), built on first use. */
    attachTracker: () => AttachTracker;
    /** The root's quota deps (bindings count against `totalWorkspaces`), built on first use. */
    quota: () => Pick<QuotaDeps, "config">;
    /** Where workspace requests and backend choices are audited (the root's `berth.audit`). */
    audit: AuditRecorder;
    /** Announces lifecycle events to tenants' webhooks (the root's `berth.lifecycle`). */
    lifecycle: LifecycleEvents;
    leaseOwnerId?: string;
  },
) {
  const { db, quota } = options;
  const backends = createBackendChoice(engine.drivers, db, options.audit);
  const binding: BindingDeps = {
    backends,
    db,
    quota,
    lifecycle: options.lifecycle,
    bindingsInFlight: new Map(),
  };
  const use: WorkspaceUseDeps = {
    ...createLeaseDeps(engine, options.leaseOwnerId ?? null, db),
    ...createAttachDeps(engine, options.attachTracker, db),
    ...binding,
  };
  const requests: RequestDeps = {
    enqueue: createEnqueue(engine.queues),
    db,
    log: engine.log,
    audit: options.audit,
  };
  const bindUse = bindDeps(use);
  const bindRequests = bindDeps(requests);
  const bindBackends = bindDeps(backends);
  const bindQueries = bindDeps({ drivers: engine.drivers, config: engine.config, db });

  return {
    engine,
    audited: bindDeps(requests)(auditWorkspaceChange),
    acquireLease: bindUse(acquireLease),
    releaseLease: bindUse(releaseLease),
    withLease: bindUse(withLease),
    callLease,
    /** Lease releases that failed and are being retried (see lease-release-retry.ts). */
    pendingLeaseReleases: () => use.releaseRetry.pending(),
    /** Stops retrying failed lease releases (graceful shutdown); the rest go to the dead-holder cleanup. */
    close: () => use.releaseRetry.close(),

    resolveForSession: bindUse(resolveForSession),
    withSessionWorkspace: bindUse(withSessionWorkspace),
    withWorkspaceOfSession: bindUse(withWorkspaceOfSession),
    withWorkspace: bindUse(withWorkspace),
    /** Attach without a lease (previews: passive traffic must neither hold nor move the idle clock). */
    attach: bindUse(attachWorkspace),

    /** The backends of this installation and the tenant's choice among them (backend-choice service). */
    backends,
    bindingFor: bindBackends(bindingFor),
    bindWorkspace: bindDeps({ backends, db, quota, lifecycle: options.lifecycle })(bindWorkspace),

    list: bindQueries(listWorkspacesFor),
    get: bindQueries(getWorkspaceDetail),
    events: bindQueries(pageWorkspaceEventsFor),
    backendInfo: () => describeBackends(engine),

    requestStop: bindRequests(requestStop),
    requestStart: bindRequests(requestStart),
    requestPurge: bindRequests(requestPurge),
    setLabel: bindRequests(labelWorkspace),
    bulk: bindRequests(requestBulk),
    purgeReceipts: bindRequests(listPurgeReceiptsWithRequesters),
    enqueueSessionPurge: bindRequests(enqueueSessionPurge),
    enqueueAgentPurge: bindRequests(enqueueAgentPurge),
  };
}

export type WorkspaceService = ReturnType<typeof createWorkspaceService>;
