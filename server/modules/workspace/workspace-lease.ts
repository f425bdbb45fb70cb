import { randomUUID } from "node:crypto";
import type { TenantScope } from "@/server/auth/scope";
import type { Db } from "@/server/db";
import type { WorkspaceEngine } from "@/server/engine/engine";
import { releaseWorkspaceLease } from "./workspace.data";
import { acquireLeaseLocked, touchWorkspaceActivity } from "./workspace-lifecycle.data";
import { createLeaseReleaseRetry, type LeaseReleaseRetry } from "./lease-release-retry";

/** `quiet`: a read's lease (dashboard browsing), kept out of the ledger so reads do not flood its events. */
export type LeaseOptions = { holder: string; reason: string; ttlMs?: number; quiet?: boolean };

/** What taking and releasing leases needs in a process. */
export type LeaseDeps = {
  engine: Pick<WorkspaceEngine, "config" | "log">;
  /** The process' database client (the Berth root's). */
  db: Db;
  /**
   * This process' liveness id (server/queue/heartbeat.ts, group `holders`), written on every lease it
   * takes, so the leases of a process that died are released as soon as its heartbeat stops.
   */
  leaseOwnerId: string | null;
  /** A release that fails (the database away as a turn ends) is retried until it lands: see the file. */
  releaseRetry: LeaseReleaseRetry;
};

export function createLeaseDeps(
  engine: Pick<WorkspaceEngine, "config" | "log">,
  leaseOwnerId: string | null,
  db: Db,
): LeaseDeps {
  const releaseRetry = createLeaseReleaseRetry({
    release: (pending) =>
      releaseWorkspaceLease(pending.scope, pending.workspaceId, pending.holder, db, {
        quiet: pending.quiet,
      }),
    touch: (pending) => touchWorkspaceActivity(pending.scope, pending.workspaceId, pending.endedAt, db),
    log: engine.log.child({ component: "lease-release" }),
    giveUpAfterMs: engine.config.maxLeaseMs,
  });
  return { engine, db, leaseOwnerId, releaseRetry };
}

export async function acquireLease(
  deps: LeaseDeps,
  scope: TenantScope,
  workspaceId: string,
  lease: LeaseOptions,
) {
  const { config } = deps.engine;
  const ttlMs = Math.min(lease.ttlMs ?? config.leaseTtlMs, config.maxLeaseMs);
  deps.releaseRetry.cancel(scope, workspaceId, lease.holder);
  return acquireLeaseLocked(
    scope,
    workspaceId,
    {
      holder: lease.holder,
      reason: lease.reason,
      expiresAt: new Date(Date.now() + ttlMs),
      ownerId: deps.leaseOwnerId,
    },
    deps.db,
    { quiet: lease.quiet ?? false },
  );
}

export async function releaseLease(
  deps: Pick<LeaseDeps, "db">,
  scope: TenantScope,
  workspaceId: string,
  holder: string,
  options: { quiet?: boolean } = {},
): Promise<boolean> {
  const released = await releaseWorkspaceLease(scope, workspaceId, holder, deps.db, options);
  // The end of a turn is activity too: the idle clock starts now, not when the turn began. The end of a
  // read is not (quiet): browsing never keeps a workspace awake.
  if (released && !options.quiet) await touchWorkspaceActivity(scope, workspaceId, new Date(), deps.db);
  return released;
}

/** A short lease for one API call (`call:<uuid>`), so the call's workspace is not stopped under it. */
export function callLease(reason: string): LeaseOptions {
  return { holder: `call:${randomUUID()}`, reason, ttlMs: 5 * 60_000 };
}
