import { releaseStoredSkills } from "@/server/modules/quota/skill-storage.service";
import type { z } from "zod";
import { resolveSystemTenantScope, tenantAdmitsWork } from "@/server/auth/resolve";
import type { TenantScope } from "@/server/auth/scope";
import type { EngineConfig } from "@/server/engine/engine-config";
import type { DriverSet } from "@/server/engine/driver-set";
import type { BackendHandle, ProvisionProgress } from "@/server/workspace/backend/driver";
import type { Logger } from "@/server/logger";
import { recordPurgeReceipt } from "@/server/modules/audit/audit.data";
import { AppError } from "@/server/shared/errors";
import { redactHostPaths } from "@/server/shared/host-paths";
import { effectiveIdleTtlMs } from "@/server/modules/tenant/tenant-policy";
import { recordUsage } from "@/server/modules/metering/metering.service";
import {
  defaultQuotaDeps,
  provisionAdmission,
  workspaceResources,
  type QuotaDeps,
} from "@/server/modules/quota/quota.service";
import { listTenantIdleTtlsBelow } from "@/server/modules/tenant/tenant-policy.data";
import { startProvisionTimings } from "@/server/modules/metrics/provision-timings";
import type { TStagePath } from "@/server/modules/metrics/stage-sample.schema";
import { emitLifecycleEvent } from "@/server/modules/webhook/webhook-events";
import { appendWorkspaceEvent } from "./workspace.data";
import type {
  ZWorkspaceProvisionPayload,
  ZWorkspacePurgePayload,
  ZWorkspaceStopPayload,
} from "./workspace.jobs";
import {
  deleteWorkspaceLeases,
  findSweepCandidates,
  findWorkspaceRecordForSystem,
  stopIfIdle,
  transitionFrom,
  type WorkspaceRecord,
} from "./workspace-lifecycle.data";
import { takeInventory } from "./workspace-inventory";
import { recordDataLostEvent } from "./workspace-data-lost";
import { specOfRecord } from "./workspace-spec";

/** What the workspace jobs need from the worker's composition root. */
export type WorkspaceJobDeps = {
  /** Every enabled backend's driver; a record's own backend acts on it. */
  drivers: DriverSet;
  config: EngineConfig;
  /** Enqueues `workspace.stop` (the sweeper hands each idle workspace to its own retryable job). */
  requestStop: (payload: z.input<typeof ZWorkspaceStopPayload>) => Promise<unknown>;
  /** Enqueues `workspace.provision` (reconcile resumes a provision whose job was lost). */
  requestProvision: (payload: z.input<typeof ZWorkspaceProvisionPayload>) => Promise<unknown>;
  /** Quota admission and limits (default: the installation's, over the process' Redis). */
  quota?: QuotaDeps;
};

/**
 * The job's tenant and workspace, re-read. `allowSuspended` for stop and purge: they are how suspending and
 * deleting a tenant act; a provision for a suspended tenant is refused (typed FORBIDDEN, not retried).
 */
async function loadRecord(
  tenantId: string,
  workspaceId: string,
  options: { allowSuspended?: boolean } = {},
): Promise<{ scope: TenantScope; record: WorkspaceRecord }> {
  const scope = await resolveSystemTenantScope(tenantId, options);
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
  /** The job's enqueue and pick-up times (epoch ms): the stage timings start there. */
  timing: { requestedAt: number; pickedUpAt: number } = { requestedAt: Date.now(), pickedUpAt: Date.now() },
): Promise<{
  outcome: "already-ready" | "provisioned" | "stopped-suspended";
  handle?: BackendHandle;
  path?: TStagePath;
}> {
  const { scope, record } = await loadRecord(payload.tenantId, payload.workspaceId);
  const machine = deps.drivers.forKind(record.backendKind).machine;
  const quota = deps.quota ?? defaultQuotaDeps();
  // A workspace that starts holding a machine is admitted against the tenant's quotas (live workspaces,
  // budget, provisions per minute) inside its transition, under the tenant's quota lock.
  const admit = provisionAdmission(record.tenantId, record.id, quota);
  const { resources, size } = await workspaceResources(record.tenantId, quota);
  const spec = { ...specOfRecord(record), resources };
  // The data-lost event is recorded once per job, whoever notices first (this job or the driver).
  let dataLost = false;
  const recordDataLost = async (reason: string) => {
    dataLost = true;
    await recordDataLostEvent(scope, record, reason);
  };
  // Off the hot path: one un-awaited buffer push when the provision ends (see stage-buffer.service.ts).
  const timings = startProvisionTimings(timing, record, (error) =>
    log.warn({ err: error }, "could not buffer stage timings"),
  );
  const path = timings.path;
  switch (record.state) {
    case "READY":
      if (await machine.exists(spec)) return { outcome: "already-ready" };
      await transitionFrom(scope, record.id, {
        from: ["READY"],
        to: "FAILED",
        reason: payload.machineGone ? "machine vanished (found on use)" : "machine vanished",
        error: "machine vanished",
      });
      await recordDataLost("its machine vanished while it was READY");
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
      // A stopped workspace keeps its data; if its machine is gone now, that data went with it.
      if (record.state === "STOPPED" && record.backendHandle !== null && !(await machine.exists(spec)))
        await recordDataLost("its machine vanished while it was stopped");
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
    timings.progress(progress.step);
    progressEvents = progressEvents
      .then(async () => {
        const reason = progress.detail ? `${progress.step}: ${progress.detail.slice(0, 500)}` : progress.step;
        // The driver found the machine's files gone (an E2B sandbox that vanished or came back empty).
        if (progress.dataLost && !dataLost) return recordDataLost(reason);
        await appendWorkspaceEvent(scope, record.id, {
          kind: "provisioning",
          reason,
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
    timings.done(false);
    emitLifecycleEvent(record.tenantId, "workspace.failed", {
      workspaceId: record.id,
      backend: record.backendKind,
      // Sent outside the installation: host paths never leave it (server/shared/host-paths.ts).
      error: redactHostPaths(message).slice(0, 1_000),
    });
    throw error;
  }
  await transitionFrom(scope, record.id, {
    from: ["PROVISIONING"],
    to: "READY",
    reason: "provisioned",
    backendHandle: handle,
    meteredSize: size,
  });
  timings.done(true);
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
  // An operator suspended the tenant while the machine was being made: that suspension's stop job found the
  // record PROVISIONING and had nothing to stop, so the machine stops here instead of running on.
  if (!(await tenantAdmitsWork(payload.tenantId))) {
    await stopWorkspace(deps, {
      tenantId: payload.tenantId,
      workspaceId: record.id,
      reason: "tenant suspended while provisioning",
    });
    return { outcome: "stopped-suspended" };
  }
  emitLifecycleEvent(record.tenantId, "workspace.ready", {
    workspaceId: record.id,
    backend: record.backendKind,
    path,
  });
  return { outcome: "provisioned", handle, path };
}

/** `workspace.stop`: READY | STOPPING → STOPPED; the machine stops, its data stays. */
export async function stopWorkspace(
  deps: Pick<WorkspaceJobDeps, "drivers">,
  payload: z.output<typeof ZWorkspaceStopPayload>,
): Promise<{ outcome: "stopped" | "nothing-to-stop"; state: string }> {
  const { scope, record } = await loadRecord(payload.tenantId, payload.workspaceId, { allowSuspended: true });
  if (record.state === "READY") {
    await transitionFrom(scope, record.id, { from: ["READY"], to: "STOPPING", reason: payload.reason });
  } else if (record.state !== "STOPPING") {
    return { outcome: "nothing-to-stop", state: record.state };
  }
  await deps.drivers.forKind(record.backendKind).machine.stop(specOfRecord(record));
  await transitionFrom(scope, record.id, { from: ["STOPPING"], to: "STOPPED", reason: payload.reason });
  emitLifecycleEvent(record.tenantId, "workspace.stopped", {
    workspaceId: record.id,
    reason: payload.reason,
  });
  return { outcome: "stopped", state: "STOPPED" };
}

const EMPTY_INVENTORY = { skills: [], mcpDeclarations: [], offloadFiles: 0, dataFiles: 0 };

async function inventoryOf(
  driver: ReturnType<WorkspaceJobDeps["drivers"]["forKind"]>,
  spec: ReturnType<typeof specOfRecord>,
): Promise<Awaited<ReturnType<typeof takeInventory>> & { inventoryError?: string }> {
  if (!(await driver.machine.exists(spec))) return EMPTY_INVENTORY;
  try {
    const backend = await driver.provider.provision(spec);
    try {
      return await takeInventory(backend);
    } finally {
      await (driver.provider.detach ? driver.provider.detach(backend) : backend.close());
    }
  } catch (error) {
    return { ...EMPTY_INVENTORY, inventoryError: error instanceof Error ? error.message : String(error) };
  }
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
  const { scope, record } = await loadRecord(payload.tenantId, payload.workspaceId, { allowSuspended: true });
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
  // The inventory is read before the machine stops: a backend whose stopped machine cannot be attached
  // (a Kubernetes workspace keeps its claim, not its Pod) is listed while it still runs. It is the receipt's
  // account, never a condition of the purge: an unreadable machine is purged all the same, and says so.
  const inventory = await inventoryOf(driver, spec);
  // What was running (or may be, after an interrupted purge) stops before its data goes.
  if (["READY", "PROVISIONING", "STOPPING", "PURGING"].includes(record.state))
    await driver.machine.stop(spec);
  const resources = await driver.machine.purge(spec);
  const leaseRows = await deleteWorkspaceLeases(scope, record.id);
  // Its skills' bytes no longer count against the tenant's skill storage.
  const skillStorageRows = await releaseStoredSkills({ workspaceId: record.id });
  const deleted = {
    reason: payload.reason,
    requestedBy: payload.actor,
    backend: driver.name,
    generation: record.generation,
    resources,
    ...inventory,
    databaseRows: { workspaceLeases: leaseRows, skillStorage: skillStorageRows },
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
  emitLifecycleEvent(record.tenantId, "workspace.purged", {
    workspaceId: record.id,
    generation: record.generation,
    receiptId: receipt.id,
  });
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
    const scope = await resolveSystemTenantScope(candidate.tenantId, { allowSuspended: true });
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
