import type { z } from "zod";
import { resolveSystemTenantScope, tenantAdmitsWork } from "@/server/auth/resolve";
import type { TenantScope } from "@/server/auth/scope";
import type { EngineConfig } from "@/server/engine/engine-config";
import type { DriverSet } from "@/server/engine/driver-set";
import type { BackendHandle, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { CheckpointStore } from "@/server/workspace/checkpoints/checkpoint-store";
import { checkResumeIntegrity } from "@/server/modules/checkpoint/resume-integrity";
import type { Logger } from "@/server/logger";
import { AppError } from "@/server/shared/errors";
import type { UsageRecorder } from "@/server/modules/metering/metering.service";
import { provisionAdmission, workspaceResources, type QuotaDeps } from "@/server/modules/quota/quota.service";
import { startProvisionTimings } from "@/server/modules/metrics/provision-timings";
import type { StageSampleRecorder } from "@/server/modules/metrics/stage-buffer.service";
import type { TStagePath } from "@/server/modules/metrics/stage-sample.schema";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import { appendWorkspaceEvent } from "@/server/modules/workspace/workspace.data";
import type {
  ZWorkspaceProvisionPayload,
  ZWorkspaceStopPayload,
} from "@/server/modules/workspace/workspace.jobs";
import {
  findWorkspaceRecordForSystem,
  transitionFrom,
  type WorkspaceRecord,
} from "@/server/modules/workspace/workspace-lifecycle.data";
import {
  dataLossRecorder,
  meterProvision,
  progressRecorder,
  recordProvisionFailure,
} from "./provision-records";
import { claimProvision, DEFAULT_PROVISION_CLAIM_MS, waitForProvisionClaim } from "./provision-claim";
import { storeHandleWhileProvisioning } from "./provision-claim.data";
import { machineForProvision, poolPathOf } from "@/server/modules/pool/warm-pool.service";
import { NO_WARM_POOLS } from "@/server/engine/warm-pool-config";
import { specOfRecord } from "@/server/modules/workspace/workspace-spec";
import type { Db } from "@/server/db";

/** What a provision needs of the workspace jobs' deps. */
type ProvisionDeps = Pick<
  WorkspaceJobDeps,
  | "drivers"
  | "config"
  | "quota"
  | "usage"
  | "stageSamples"
  | "lifecycle"
  | "provisionClaimMs"
  | "checkpoints"
  | "requestPoolRefill"
  | "db"
>;

/** What the workspace jobs need from the worker's composition root. */
export type WorkspaceJobDeps = {
  /** Every enabled backend's driver; a record's own backend acts on it. */
  drivers: DriverSet;
  config: EngineConfig;
  /** Enqueues `workspace.stop` (the sweeper hands each idle workspace to its own retryable job). */
  requestStop: (payload: z.input<typeof ZWorkspaceStopPayload>) => Promise<unknown>;
  /** Enqueues `pool.refill` (a claim took a warm machine, or found the pool empty). Absent: the tick refills. */
  requestPoolRefill?: () => Promise<unknown>;
  /** Enqueues `workspace.provision` (reconcile resumes a provision whose job was lost). */
  requestProvision: (payload: z.input<typeof ZWorkspaceProvisionPayload>) => Promise<unknown>;
  /** The process' database client (the Berth root's). */
  db: Db;
  /** Quota admission and limits (the root's, built on first use). */
  quota: () => QuotaDeps;
  /** Buffers a provision's usage (the root's, built on first use). */
  usage: () => UsageRecorder;
  /** Buffers a provision's stage timings (the root's, built on first use). */
  stageSamples: () => StageSampleRecorder;
  /** Announces `workspace.ready`, `.failed` and `.stopped` to tenants' webhooks (the root's `berth.lifecycle`). */
  lifecycle: LifecycleEvents;
  /** The turn checkpoints' store: a recreated or resumed machine's folder is compared with the last one. */
  checkpoints?: CheckpointStore;
  /**
   * How long a provision run's claim on creating a machine holds unless renewed (provision-claim.ts): the
   * workers' job lock duration, so a dead run is taken over when its job would be. Default 30 s.
   */
  provisionClaimMs?: number;
};

/**
 * The job's tenant and workspace, re-read. `allowSuspended` for stop and purge: they are how suspending and
 * deleting a tenant act; a provision for a suspended tenant is refused (typed FORBIDDEN, not retried).
 */
async function loadRecord(
  tenantId: string,
  workspaceId: string,
  options: { allowSuspended?: boolean } = {},
  db: Db,
): Promise<{ scope: TenantScope; record: WorkspaceRecord }> {
  const scope = await resolveSystemTenantScope(tenantId, options, db);
  const record = await findWorkspaceRecordForSystem(workspaceId, db);
  if (!record || record.tenantId !== tenantId) {
    throw new AppError("NOT_FOUND", `workspace ${workspaceId} not found in tenant ${tenantId}`);
  }
  return { scope, record };
}

type ProvisionOutcome = {
  outcome: "already-ready" | "provisioned" | "stopped-suspended";
  handle?: BackendHandle;
  path?: TStagePath;
};

/**
 * `workspace.provision`: PENDING | STOPPED | FAILED → PROVISIONING → READY, creating or restarting the machine;
 * PURGED → PROVISIONING starts the id's next generation (a fresh, empty machine).
 * Safe to run again at any point: a READY workspace whose machine exists is left alone. The machine is
 * created under the workspace's provision claim (provision-claim.ts), one run at a time: a job that finds
 * another run creating it (Redis lost that run's job, and the job was enqueued again) waits for that run
 * and then looks afresh (READY: nothing to do); one that finds PROVISIONING with no live claim is the retry
 * of an attempt whose worker died (stalled-job recovery), so it provisions again (create-or-get).
 */
export async function provisionWorkspace(
  deps: ProvisionDeps,
  payload: z.output<typeof ZWorkspaceProvisionPayload>,
  log: Logger,
  /** The job's enqueue and pick-up times (epoch ms): the stage timings start there. */
  timing: { requestedAt: number; pickedUpAt: number } = { requestedAt: Date.now(), pickedUpAt: Date.now() },
  /** The job's signal (shutdown, a lost lock): ends a wait for another run's claim. */
  signal?: AbortSignal,
): Promise<ProvisionOutcome> {
  const { db } = deps;
  for (;;) {
    const outcome = await provisionOnce(deps, payload, log, timing);
    if (outcome !== "claim-held") return outcome;
    await waitForProvisionClaim(payload.workspaceId, signal, db);
  }
}

/** One look at the workspace and, under its claim, the provision; "claim-held": another run has it. */
async function provisionOnce(
  deps: ProvisionDeps,
  payload: z.output<typeof ZWorkspaceProvisionPayload>,
  log: Logger,
  timing: { requestedAt: number; pickedUpAt: number },
): Promise<ProvisionOutcome | "claim-held"> {
  const { db } = deps;
  const { scope, record } = await loadRecord(payload.tenantId, payload.workspaceId, {}, db);
  const driver = deps.drivers.forKind(record.backendKind);
  const quota = deps.quota();
  // A workspace that starts holding a machine is admitted against the tenant's quotas (live workspaces,
  // budget, provisions per minute) inside its transition, under the tenant's quota lock.
  const admit = provisionAdmission(record.tenantId, record.id, quota);
  const { resources, size } = await workspaceResources(record.tenantId, quota, db);
  const spec = { ...specOfRecord(record), resources };
  const dataLoss = dataLossRecorder(scope, record, db);
  // Off the hot path: one un-awaited buffer push when the provision ends (see stage-buffer.service.ts).
  const timings = startProvisionTimings(timing, record, deps.stageSamples(), (error) =>
    log.warn({ err: error }, "could not buffer stage timings"),
  );
  const entered = await enterProvisioning({ scope, record, payload, driver, spec, admit, dataLoss }, db);
  if (entered === "already-ready") return { outcome: "already-ready" };
  const claim = await claimProvision(record.id, deps.provisionClaimMs ?? DEFAULT_PROVISION_CLAIM_MS, log, db);
  if (!claim) return "claim-held";
  let handle: BackendHandle;
  try {
    if (record.state === "PROVISIONING") {
      await appendWorkspaceEvent(
        scope,
        record.id,
        {
          kind: "provisioning",
          reason: "retrying an interrupted provision",
          data: { attempt: 0 },
        },
        db,
      );
    }
    const progress = progressRecorder(scope, record, timings, dataLoss, log, db);
    try {
      // A generation after a purge starts without the old handle: its machine is gone. A workspace with
      // no machine yet may get a warm pool's (server/modules/pool/).
      const made = await machineForProvision(
        { drivers: deps.drivers, config: deps.config.warmPools ?? NO_WARM_POOLS, db, quota },
        driver,
        record.state === "PURGED" ? { ...spec, handle: null } : spec,
        {
          firstUse: record.state === "PURGED" || record.backendHandle === null,
          onProgress: progress.onProgress,
          log,
        },
      );
      handle = made.handle;
      const poolPath = poolPathOf(made.pooled);
      if (poolPath) {
        timings.pooled(poolPath);
        void deps
          .requestPoolRefill?.()
          .catch((error: unknown) => log.warn({ err: error }, "could not ask for a warm pool refill"));
      }
      // Stored at once: a retry of this provision then restarts the bound machine instead of claiming another.
      if (made.pooled.served) await storeHandleWhileProvisioning(record.id, handle, db);
      await progress.recorded();
    } catch (error) {
      await progress.recorded();
      await recordProvisionFailure(scope, record, error, timings, deps.lifecycle, log, db);
      throw error;
    }
    // Before READY, so no turn can change the folder while it is compared with the last checkpoint.
    if (deps.checkpoints && record.state !== "PURGED")
      await checkResumed({ store: deps.checkpoints, db, log }, driver, scope, record, {
        ...spec,
        handle,
      });
    await transitionFrom(
      scope,
      record.id,
      {
        from: ["PROVISIONING"],
        to: "READY",
        reason: "provisioned",
        backendHandle: handle,
        meteredSize: size,
      },
      db,
    );
  } finally {
    await claim.end();
  }
  timings.done(true);
  await meterProvision(deps.usage(), record, size, log);
  // An operator suspended the tenant while the machine was being made: that suspension's stop job found the
  // record PROVISIONING and had nothing to stop, so the machine stops here instead of running on.
  if (!(await tenantAdmitsWork(payload.tenantId, db))) {
    await stopWorkspace(deps, {
      tenantId: payload.tenantId,
      workspaceId: record.id,
      reason: "tenant suspended while provisioning",
    });
    return { outcome: "stopped-suspended" };
  }
  deps.lifecycle.emit(record.tenantId, "workspace.ready", {
    workspaceId: record.id,
    backend: record.backendKind,
    path: timings.path,
  });
  return { outcome: "provisioned", handle, path: timings.path };
}

/** How long the resume check may take before the provision goes on without it. */
const RESUME_CHECK_MS = 60_000;

/** The resume integrity check (resume-integrity.ts) on the new machine, attached for it and let go. */
async function checkResumed(
  deps: { store: CheckpointStore; db: Db; log: Logger },
  driver: Driver,
  scope: TenantScope,
  record: WorkspaceRecord,
  spec: WorkspaceSpec,
): Promise<void> {
  const signal = AbortSignal.timeout(RESUME_CHECK_MS);
  await checkResumeIntegrity(deps, scope, record, {
    signal,
    // Only when the generation has a checkpoint to compare with: a first provision attaches nothing more.
    async withMachine(check) {
      const machine = await driver.attach(spec, { signal });
      try {
        await check(machine);
      } finally {
        await driver.detach(machine).catch(() => {});
      }
    },
  });
}

type Driver = ReturnType<DriverSet["forKind"]>;

/**
 * Moves the record to PROVISIONING from whatever state the job found it in (or finds a READY record's
 * machine still there: nothing to do). A purge or a stop under way makes the job wait (retryable).
 */
async function enterProvisioning(
  input: {
    scope: TenantScope;
    record: WorkspaceRecord;
    payload: z.output<typeof ZWorkspaceProvisionPayload>;
    driver: Driver;
    spec: Parameters<Driver["exists"]>[0];
    admit: ReturnType<typeof provisionAdmission>;
    dataLoss: ReturnType<typeof dataLossRecorder>;
  },
  db: Db,
): Promise<"already-ready" | "provisioning"> {
  const { scope, record, payload, driver, spec, admit, dataLoss } = input;
  switch (record.state) {
    case "READY":
      if (await driver.exists(spec)) return "already-ready";
      await transitionFrom(
        scope,
        record.id,
        {
          from: ["READY"],
          to: "FAILED",
          reason: payload.machineGone ? "machine vanished (found on use)" : "machine vanished",
          error: "machine vanished",
        },
        db,
      );
      await dataLoss.record("its machine vanished while it was READY");
      await transitionFrom(
        scope,
        record.id,
        {
          from: ["FAILED"],
          to: "PROVISIONING",
          reason: payload.reason,
        },
        db,
      );
      break;
    case "PURGED": {
      // The purge deleted the last generation's machine and data: this use starts the next one, empty.
      const next = record.generation + 1;
      await transitionFrom(
        scope,
        record.id,
        {
          from: ["PURGED"],
          to: "PROVISIONING",
          reason: `${payload.reason}: generation ${next} after a purge`,
          admit,
        },
        db,
      );
      break;
    }
    case "PURGING":
      // Provisioning now could bring back what the purge is deleting: wait for it (BullMQ's backoff).
      throw new AppError("UNAVAILABLE", `workspace ${record.id} is being purged; provisioning will retry`);
    case "STOPPING":
      // The stop job finishes first; BullMQ's backoff brings this job back.
      throw new AppError("UNAVAILABLE", `workspace ${record.id} is stopping; provisioning will retry`);
    case "PROVISIONING":
      // Another run may be creating the machine right now: the claim decides (provisionOnce).
      break;
    case "PENDING":
    case "STOPPED":
    case "FAILED":
      // A stopped workspace keeps its data; if its machine is gone now, that data went with it.
      if (record.state === "STOPPED" && record.backendHandle !== null && !(await driver.exists(spec)))
        await dataLoss.record("its machine vanished while it was stopped");
      await transitionFrom(
        scope,
        record.id,
        {
          from: [record.state],
          to: "PROVISIONING",
          reason: payload.reason,
          admit,
        },
        db,
      );
      break;
  }
  return "provisioning";
}

/** `workspace.stop`: READY | STOPPING → STOPPED; the machine stops, its data stays. */
export async function stopWorkspace(
  deps: Pick<WorkspaceJobDeps, "db" | "drivers" | "lifecycle">,
  payload: z.output<typeof ZWorkspaceStopPayload>,
): Promise<{ outcome: "stopped" | "nothing-to-stop"; state: string }> {
  const { db } = deps;
  const { scope, record } = await loadRecord(
    payload.tenantId,
    payload.workspaceId,
    { allowSuspended: true },
    db,
  );
  if (record.state === "READY") {
    await transitionFrom(scope, record.id, { from: ["READY"], to: "STOPPING", reason: payload.reason }, db);
  } else if (record.state !== "STOPPING") {
    return { outcome: "nothing-to-stop", state: record.state };
  }
  await deps.drivers.forKind(record.backendKind).stop(specOfRecord(record));
  await transitionFrom(scope, record.id, { from: ["STOPPING"], to: "STOPPED", reason: payload.reason }, db);
  deps.lifecycle.emit(record.tenantId, "workspace.stopped", {
    workspaceId: record.id,
    reason: payload.reason,
  });
  return { outcome: "stopped", state: "STOPPED" };
}
