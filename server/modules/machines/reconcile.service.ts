import type { Db } from "@/server/db";
import type { z } from "zod";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import type { Logger } from "@/server/logger";
import type { WorkspaceDriver } from "@/server/workspace/drivers/driver";
import { appendWorkspaceEvent } from "@/server/modules/workspace/workspace.data";
import type { ZWorkspaceReconcilePayload } from "@/server/modules/workspace/workspace.jobs";
import type { WorkspaceJobDeps } from "./machine-jobs.service";
import {
  findWorkspaceRecordForSystem,
  listLiveRecordsForSystem,
  listStuckTransitionsForSystem,
  transitionFrom,
} from "@/server/modules/workspace/workspace-lifecycle.data";
import { recordDataLostEvent } from "./data-lost";
import { specOfRecord } from "@/server/modules/workspace/workspace-spec";

export type ReconcileReport = {
  dryRun: boolean;
  /** Backend resources under Berth's paths/labels without a live record, deleted. */
  reapedOrphans: { locator: string; workspaceId: string | null; tenantId: string | null }[];
  /** Records (READY/STOPPED) whose backend resources are gone, marked FAILED. */
  markedVanished: string[];
  /** Machine images nothing needs any more (an earlier Berth's or config's), removed. */
  prunedImages: string[];
  /** Records stuck in PROVISIONING or STOPPING (their job lost or out of attempts), whose job was enqueued again. */
  resumed: { workspaceId: string; state: "PROVISIONING" | "STOPPING"; since: string }[];
};

/**
 * How long a record may sit in PROVISIONING or STOPPING before reconcile resumes it. Re-enqueueing is safe
 * at any age (the deterministic job id joins a job that is still waiting or running), so this only keeps
 * reconcile from racing the job that is about to take a fresh record.
 */
const STUCK_AFTER_MS = 10 * 60_000;

/**
 * `workspace.reconcile`: brings records and backend resources back in agreement on every enabled backend,
 * reporting what it did.
 */
export async function reconcileWorkspaces(
  deps: Pick<WorkspaceJobDeps, "db" | "drivers" | "requestProvision" | "requestStop">,
  payload: z.output<typeof ZWorkspaceReconcilePayload>,
  log: Logger,
  /** The job's signal: an orphan folder is reaped in yielding batches that stop at it (shutdown). */
  run: { signal?: AbortSignal | undefined } = {},
  now = new Date(),
): Promise<ReconcileReport> {
  const { db } = deps;
  const report: ReconcileReport = {
    dryRun: payload.dryRun,
    reapedOrphans: [],
    markedVanished: [],
    prunedImages: [],
    resumed: [],
  };
  for (const driver of deps.drivers.all) await reconcileDriver(driver, payload, report, log, run.signal, db);
  await resumeStuckTransitions(deps, payload, report, now);
  const changes =
    report.reapedOrphans.length +
    report.markedVanished.length +
    report.prunedImages.length +
    report.resumed.length;
  if (changes > 0) log.info(report, "workspace reconcile");
  return report;
}

/**
 * A record in PROVISIONING or STOPPING whose job is gone (lost with Redis' data) or spent its attempts while
 * the database was away (so even its FAILED write failed) would stay there for good: nothing else looks at
 * it. Its job is enqueued again under the deterministic id (a live job is simply joined), which finishes
 * the transition (provision and stop both resume an interrupted run), and an event says why.
 */
async function resumeStuckTransitions(
  deps: Pick<WorkspaceJobDeps, "db" | "requestProvision" | "requestStop">,
  payload: z.output<typeof ZWorkspaceReconcilePayload>,
  report: ReconcileReport,
  now: Date,
): Promise<void> {
  const { db } = deps;
  const before = new Date(now.getTime() - (payload.stuckAfterMs ?? STUCK_AFTER_MS));
  for (const record of await listStuckTransitionsForSystem(before, db)) {
    const state = record.state === "PROVISIONING" ? "PROVISIONING" : "STOPPING";
    const since = record.stateChangedAt.toISOString();
    report.resumed.push({ workspaceId: record.id, state, since });
    if (payload.dryRun) continue;
    const scope = await resolveSystemTenantScope(record.tenantId, { allowSuspended: true }, db);
    const reason = `reconcile: ${state} since ${since}; its job enqueued again (a live one is joined)`;
    await appendWorkspaceEvent(
      scope,
      record.id,
      {
        kind: state === "PROVISIONING" ? "provisioning" : "stopping",
        reason,
        data: { stuckSince: since },
      },
      db,
    );
    const ref = { tenantId: record.tenantId, workspaceId: record.id, reason };
    await (state === "PROVISIONING" ? deps.requestProvision(ref) : deps.requestStop(ref));
  }
}

async function reconcileDriver(
  driver: WorkspaceDriver,
  payload: z.output<typeof ZWorkspaceReconcilePayload>,
  report: ReconcileReport,
  log: Logger,
  signal: AbortSignal | undefined,
  db: Db,
): Promise<void> {
  const records = new Map(
    (await listLiveRecordsForSystem(driver.kind, db)).map((record) => [record.id, record]),
  );
  for (const resource of await driver.listResources()) {
    const record = resource.workspaceId === null ? undefined : records.get(resource.workspaceId);
    if (record && record.tenantId === resource.tenantId) continue;
    // Re-check right before reaping: a record may have been created since the listing (on any backend:
    // host-folder backends share the base dir's layout).
    const fresh =
      resource.workspaceId === null ? null : await findWorkspaceRecordForSystem(resource.workspaceId, db);
    if (fresh && fresh.state !== "PURGED" && fresh.tenantId === resource.tenantId) continue;
    // A reap stopped half-way (shutdown) is finished by the next reconcile: the folder is still an orphan.
    if (!payload.dryRun) await driver.reap(resource, { signal });
    report.reapedOrphans.push({
      locator: resource.locator,
      workspaceId: resource.workspaceId,
      tenantId: resource.tenantId,
    });
  }
  for (const record of records.values()) {
    if (record.state !== "READY" && record.state !== "STOPPED") continue;
    if (await driver.exists(specOfRecord(record))) continue;
    report.markedVanished.push(record.id);
    if (payload.dryRun) continue;
    const scope = await resolveSystemTenantScope(record.tenantId, { allowSuspended: true }, db);
    await transitionFrom(
      scope,
      record.id,
      {
        from: ["READY", "STOPPED"],
        to: "FAILED",
        reason: "reconcile: backend resources vanished",
        error: "backend resources vanished",
      },
      db,
    )
      .then(() => recordDataLostEvent(scope, record, "reconcile found its machine gone", db))
      .catch((error: unknown) =>
        log.warn({ err: error, workspaceId: record.id }, "could not mark a vanished workspace"),
      );
  }
  // After the orphans went: their containers no longer hold their images.
  const pruned =
    (await driver.pruneImages?.({ dryRun: payload.dryRun }).catch((error: unknown) => {
      // Disk hygiene only: it must not fail the reconcile of records and resources above.
      log.warn({ err: error, backend: driver.name }, "could not prune workspace images");
      return [];
    })) ?? [];
  report.prunedImages.push(...pruned);
}
