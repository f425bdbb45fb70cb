import type { z } from "zod";
import { resolveSystemTenantScope } from "@/server/auth/resolve";
import type { TenantScope } from "@/server/auth/scope";
import type { EngineConfig } from "@/server/engine/engine-config";
import type { DriverSet } from "@/server/engine/driver-set";
import type { BackendHandle, ProvisionProgress, WorkspaceDriver } from "@/server/workspace/backend/driver";
import type { Logger } from "@/server/logger";
import { recordPurgeReceipt } from "@/server/modules/audit/audit.data";
import { AppError } from "@/server/shared/errors";
import { effectiveIdleTtlMs } from "@/server/modules/tenant/tenant-policy";
import { recordUsage } from "@/server/modules/metering/metering.service";
import {
  defaultQuotaDeps,
  provisionAdmission,
  workspaceResources,
  type QuotaDeps,
} from "@/server/modules/quota/quota.service";
import { listTenantIdleTtlsBelow } from "@/server/modules/tenant/tenant-policy.data";
import { appendWorkspaceEvent } from "./workspace.data";
import type {
  ZWorkspaceProvisionPayload,
  ZWorkspacePurgePayload,
  ZWorkspaceReconcilePayload,
  ZWorkspaceStopPayload,
} from "./workspace.jobs";
import {
  deleteWorkspaceLeases,
  findSweepCandidates,
  findWorkspaceRecordForSystem,
  listLiveRecordsForSystem,
  stopIfIdle,
  transitionFrom,
  type WorkspaceRecord,
} from "./workspace-lifecycle.data";
import { takeInventory } from "./workspace-inventory";
import { specOfRecord } from "./workspace-spec";

/** What the workspace jobs need from the worker's composition root. */
export type WorkspaceJobDeps = {
  /** Every enabled backend's driver; a record's own backend acts on it. */
  drivers: DriverSet;
  config: EngineConfig;
  /** Enqueues `workspace.stop` (the sweeper hands each idle workspace to its own retryable job). */
  requestStop: (payload: z.input<typeof ZWorkspaceStopPayload>) => Promise<unknown>;
  /** Quota admission and limits (default: the installation's, over the process' Redis). */
  quota?: QuotaDeps;
};

async function loadRecord(
  tenantId: string,
  workspaceId: string,
): Promise<{ scope: TenantScope; record: WorkspaceRecord }> {
  const scope = await resolveSystemTenantScope(tenantId);
  const record = await findWorkspaceRecordForSystem(workspaceId);
  if (!record || record.tenantId !== tenantId) {
    throw new AppError("NOT_FOUND", `workspace ${workspaceId} not found in tenant ${tenantId}`);
  }
  return { scope, record };
}

/**
 * `workspace.provision`: PENDING | STOPPED | FAILED → PROVISIONING → READY, creating or restarting the machine;
 * PURGED → PROVISIONING starts the id's next generation (a fresh, empty machine).
 * Safe to run again at any point: a READY workspace whose machine exists is left alone, and a job that finds
 * PROVISIONING is the retry of an attempt whose worker died (stalled-job recovery), so it provisions again
 * (machine provisioning is create-or-get).
 */
export async function provisionWorkspace(
  deps: Pick<WorkspaceJobDeps, "drivers" | "quota">,
  payload: z.output<typeof ZWorkspaceProvisionPayload>,
  log: Logger,
): Promise<{ outcome: "already-ready" | "provisioned"; handle?: BackendHandle }> {
  const { scope, record } = await loadRecord(payload.tenantId, payload.workspaceId);
  const machine = deps.drivers.forKind(record.backendKind).machine;
  const quota = deps.quota ?? defaultQuotaDeps();
  // A workspace that starts holding a machine is admitted against the tenant's quotas (live workspaces,
  // budget, provisions per minute) inside its transition, under the tenant's quota lock.
  const admit = provisionAdmission(record.tenantId, record.id, quota);
  const { resources, size } = await workspaceResources(record.tenantId, quota);
  const spec = { ...specOfRecord(record), resources };
  switch (record.state) {
    case "READY":
      if (await machine.exists(spec)) return { outcome: "already-ready" };
      await transitionFrom(scope, record.id, {
        from: ["READY"],
        to: "FAILED",
        reason: "machine vanished",
        error: "machine vanished",
      });
      await transitionFrom(scope, record.id, {
        from: ["FAILED"],
        to: "PROVISIONING",
        reason: payload.reason,
      });
      break;
    case "PURGED": {
      // The purge deleted the last generation's machine and data: this use starts the next one, empty.
      const next = record.generation + 1;
      await transitionFrom(scope, record.id, {
        from: ["PURGED"],
        to: "PROVISIONING",
        reason: `${payload.reason}: generation ${next} after a purge`,
        admit,
      });
      break;
    }
    case "PURGING":
      // Provisioning now could bring back what the purge is deleting: wait for it (BullMQ's backoff).
      throw new AppError("UNAVAILABLE", `workspace ${record.id} is being purged; provisioning will retry`);
    case "STOPPING":
      // The stop job finishes first; BullMQ's backoff brings this job back.
      throw new AppError("UNAVAILABLE", `workspace ${record.id} is stopping; provisioning will retry`);
    case "PROVISIONING":
      await appendWorkspaceEvent(scope, record.id, {
        kind: "provisioning",
        reason: "retrying an interrupted provision",
        data: { attempt: 0 },
      });
      break;
    case "PENDING":
    case "STOPPED":
    case "FAILED":
      await transitionFrom(scope, record.id, {
        from: [record.state],
        to: "PROVISIONING",
        reason: payload.reason,
        admit,
      });
      break;
  }
  // Each provisioning step (image build output, container created or reattached, gateway ready) becomes a
  // WorkspaceEvent, in order, so an admin can watch a slow first build and see where a failure happened.
  let progressEvents = Promise.resolve();
  const onProgress = (progress: ProvisionProgress) => {
    progressEvents = progressEvents
      .then(async () => {
        await appendWorkspaceEvent(scope, record.id, {
          kind: "provisioning",
          reason: progress.detail ? `${progress.step}: ${progress.detail.slice(0, 500)}` : progress.step,
          data: { step: progress.step },
        });
      })
      .catch((error: unknown) => log.warn({ err: error }, "could not record a provisioning step"));
  };
  let handle: BackendHandle;
  try {
    // A generation after a purge starts without the old handle: its machine is gone.
    handle = await machine.provision(record.state === "PURGED" ? { ...spec, handle: null } : spec, {
      onProgress,
    });
    await progressEvents;
  } catch (error) {
    await progressEvents;
    const message = error instanceof Error ? error.message : String(error);
    await transitionFrom(scope, record.id, {
      from: ["PROVISIONING"],
      to: "FAILED",
      reason: "provisioning failed",
      error: message.slice(0, 4000),
    }).catch((transitionError: unknown) =>
      log.warn({ err: transitionError }, "could not record the failed provision"),
    );
    throw error;
  }
  await transitionFrom(scope, record.id, {
    from: ["PROVISIONING"],
    to: "READY",
    reason: "provisioned",
    backendHandle: handle,
    meteredSize: size,
  });
  await recordUsage([
    {
      tenantId: record.tenantId,
      kind: "provision",
      quantity: 1,
      backend: record.backendKind,
      size,
      agentId: record.agentId,
      userId: record.userId,
      workspaceId: record.id,
    },
  ]).catch((error: unknown) => log.warn({ err: error }, "could not meter a provision"));
  return { outcome: "provisioned", handle };
}

/** `workspace.stop`: READY | STOPPING → STOPPED; the machine stops, its data stays. */
export async function stopWorkspace(
  deps: Pick<WorkspaceJobDeps, "drivers">,
  payload: z.output<typeof ZWorkspaceStopPayload>,
): Promise<{ outcome: "stopped" | "nothing-to-stop"; state: string }> {
  const { scope, record } = await loadRecord(payload.tenantId, payload.workspaceId);
  if (record.state === "READY") {
    await transitionFrom(scope, record.id, { from: ["READY"], to: "STOPPING", reason: payload.reason });
  } else if (record.state !== "STOPPING") {
    return { outcome: "nothing-to-stop", state: record.state };
  }
  await deps.drivers.forKind(record.backendKind).machine.stop(specOfRecord(record));
  await transitionFrom(scope, record.id, { from: ["STOPPING"], to: "STOPPED", reason: payload.reason });
  return { outcome: "stopped", state: "STOPPED" };
}

/**
 * `workspace.purge`: claims the workspace (→ PURGING, so no use provisions it while its data goes), stops
 * it, lists what it holds, deletes the machine and its data and its lease rows, ends the generation
 * (→ PURGED) and writes a purge receipt saying what went and when. The id stays usable: its next use
 * provisions generation + 1. A payload naming an older generation than the record's was done already.
 */
export async function purgeWorkspace(
  deps: Pick<WorkspaceJobDeps, "drivers">,
  payload: z.output<typeof ZWorkspacePurgePayload>,
): Promise<{ outcome: "purged" | "already-purged"; receiptId?: string; generation?: number }> {
  const { scope, record } = await loadRecord(payload.tenantId, payload.workspaceId);
  const requested = payload.generation ?? record.generation;
  if (record.generation > requested) return { outcome: "already-purged" };
  if (record.state === "PURGED") return { outcome: "already-purged" };
  const driver = deps.drivers.forKind(record.backendKind);
  const spec = specOfRecord(record);
  // A PURGING record is the retry of a purge whose worker died: carry on where it stopped.
  if (record.state !== "PURGING") {
    await transitionFrom(scope, record.id, {
      from: [record.state],
      to: "PURGING",
      reason: payload.reason,
      data: { requestedBy: payload.actor },
    });
  }
  // What was running (or may be, after an interrupted purge) stops before its data goes.
  if (["READY", "PROVISIONING", "STOPPING", "PURGING"].includes(record.state))
    await driver.machine.stop(spec);
  const inventory = (await driver.machine.exists(spec))
    ? await (async () => {
        const backend = await driver.provider.provision(spec);
        try {
          return await takeInventory(backend);
        } finally {
          await (driver.provider.detach ? driver.provider.detach(backend) : backend.close());
        }
      })()
    : { skills: [], mcpDeclarations: [], offloadFiles: 0, dataFiles: 0 };
  const resources = await driver.machine.purge(spec);
  const leaseRows = await deleteWorkspaceLeases(scope, record.id);
  const deleted = {
    reason: payload.reason,
    requestedBy: payload.actor,
    backend: driver.name,
    generation: record.generation,
    resources,
    ...inventory,
    databaseRows: { workspaceLeases: leaseRows },
    deletedAt: new Date().toISOString(),
  };
  await transitionFrom(scope, record.id, {
    from: ["PURGING"],
    to: "PURGED",
    reason: payload.reason,
    backendHandle: null,
    data: {
      resources,
      skills: inventory.skills.length,
      mcpDeclarations: inventory.mcpDeclarations.length,
      nextUse: `provisions generation ${record.generation + 1}`,
    },
  });
  const receipt = await recordPurgeReceipt(scope, { targetType: "workspace", targetId: record.id, deleted });
  return { outcome: "purged", receiptId: receipt.id, generation: record.generation };
}

/**
 * `workspace.sweep` (a repeating job scheduler): each READY workspace idle past its TTL (the tenant's
 * `workspaceIdleTtlMs` when shorter than the installation's, else the installation's) and holding no lease
 * (leases older than the hard maximum do not count) goes to STOPPING under a row lock and gets its own
 * `workspace.stop` job. Leased workspaces are skipped and reported.
 */
export async function sweepIdleWorkspaces(
  deps: WorkspaceJobDeps,
  log: Logger,
  now = new Date(),
): Promise<{ stopping: string[]; leased: string[]; skipped: number }> {
  const installationTtlMs = deps.config.idleTtlMs;
  const idleBefore = new Date(now.getTime() - installationTtlMs);
  // A tenant's own idle TTL counts when it is shorter (the installation's is the maximum): min(tenant, installation).
  const tenantTtls = new Map(
    (await listTenantIdleTtlsBelow(installationTtlMs)).map((row) => [row.tenantId, row.idleTtlMs]),
  );
  const tenantIdleBefore = [...tenantTtls].map(([tenantId, ttlMs]) => ({
    tenantId,
    idleBefore: new Date(now.getTime() - ttlMs),
  }));
  const leaseBornAfter = new Date(now.getTime() - deps.config.maxLeaseMs);
  const stopping: string[] = [];
  const leased: string[] = [];
  let skipped = 0;
  for (const candidate of await findSweepCandidates({ idleBefore, tenantIdleBefore, limit: 500 })) {
    const scope = await resolveSystemTenantScope(candidate.tenantId);
    const tenantTtlMs = tenantTtls.get(candidate.tenantId);
    const ttlMs = effectiveIdleTtlMs(tenantTtlMs ?? null, installationTtlMs);
    const reason =
      `idle for more than ${Math.round(ttlMs / 1000)} s` +
      (tenantTtlMs === undefined ? "" : " (tenant setting)");
    const decision = await stopIfIdle(scope, candidate.id, {
      idleBefore: new Date(now.getTime() - ttlMs),
      leaseBornAfter,
      reason,
    });
    if (decision.outcome === "stopping") {
      stopping.push(candidate.id);
      await deps.requestStop({ tenantId: candidate.tenantId, workspaceId: candidate.id, reason });
    } else if (decision.outcome === "leased") {
      leased.push(candidate.id);
    } else {
      skipped++;
    }
  }
  if (stopping.length > 0 || leased.length > 0) log.info({ stopping, leased }, "workspace sweep");
  return { stopping, leased, skipped };
}

export type ReconcileReport = {
  dryRun: boolean;
  /** Backend resources under Berth's paths/labels without a live record, deleted. */
  reapedOrphans: { locator: string; workspaceId: string | null; tenantId: string | null }[];
  /** Records (READY/STOPPED) whose backend resources are gone, marked FAILED. */
  markedVanished: string[];
  /** Machine images nothing needs any more (an earlier Berth's or config's), removed. */
  prunedImages: string[];
};

/**
 * `workspace.reconcile`: brings records and backend resources back in agreement on every enabled backend,
 * reporting what it did.
 */
export async function reconcileWorkspaces(
  deps: Pick<WorkspaceJobDeps, "drivers">,
  payload: z.output<typeof ZWorkspaceReconcilePayload>,
  log: Logger,
): Promise<ReconcileReport> {
  const report: ReconcileReport = {
    dryRun: payload.dryRun,
    reapedOrphans: [],
    markedVanished: [],
    prunedImages: [],
  };
  for (const driver of deps.drivers.all) await reconcileDriver(driver, payload, report, log);
  if (report.reapedOrphans.length + report.markedVanished.length + report.prunedImages.length > 0)
    log.info(report, "workspace reconcile");
  return report;
}

async function reconcileDriver(
  driver: WorkspaceDriver,
  payload: z.output<typeof ZWorkspaceReconcilePayload>,
  report: ReconcileReport,
  log: Logger,
): Promise<void> {
  const { machine } = driver;
  const records = new Map((await listLiveRecordsForSystem(driver.kind)).map((record) => [record.id, record]));
  for (const resource of await machine.listResources()) {
    const record = resource.workspaceId === null ? undefined : records.get(resource.workspaceId);
    if (record && record.tenantId === resource.tenantId) continue;
    // Re-check right before reaping: a record may have been created since the listing (on any backend:
    // host-folder backends share the base dir's layout).
    const fresh =
      resource.workspaceId === null ? null : await findWorkspaceRecordForSystem(resource.workspaceId);
    if (fresh && fresh.state !== "PURGED" && fresh.tenantId === resource.tenantId) continue;
    if (!payload.dryRun) await machine.reap(resource);
    report.reapedOrphans.push({
      locator: resource.locator,
      workspaceId: resource.workspaceId,
      tenantId: resource.tenantId,
    });
  }
  for (const record of records.values()) {
    if (record.state !== "READY" && record.state !== "STOPPED") continue;
    if (await machine.exists(specOfRecord(record))) continue;
    report.markedVanished.push(record.id);
    if (payload.dryRun) continue;
    const scope = await resolveSystemTenantScope(record.tenantId);
    await transitionFrom(scope, record.id, {
      from: ["READY", "STOPPED"],
      to: "FAILED",
      reason: "reconcile: backend resources vanished",
      error: "backend resources vanished",
    }).catch((error: unknown) =>
      log.warn({ err: error, workspaceId: record.id }, "could not mark a vanished workspace"),
    );
  }
  // After the orphans went: their containers no longer hold their images.
  const pruned =
    (await machine.pruneImages?.({ dryRun: payload.dryRun }).catch((error: unknown) => {
      // Disk hygiene only: it must not fail the reconcile of records and resources above.
      log.warn({ err: error, backend: driver.name }, "could not prune workspace images");
      return [];
    })) ?? [];
  report.prunedImages.push(...pruned);
}
