import type { Db } from "@/server/db";
import { resolveSystemTenantScope, tenantAdmitsWork } from "@/server/auth/resolve";
import type { DriverSet } from "@/server/engine/driver-set";
import type { WarmPoolConfig } from "@/server/engine/warm-pool-config";
import type { Logger } from "@/server/logger";
import { newProvisionRun, DEFAULT_PROVISION_CLAIM_MS } from "@/server/modules/machines/provision-claim";
import { storeHandleWhileProvisioning } from "@/server/modules/machines/provision-claim.data";
import { meterProvision } from "@/server/modules/machines/provision-records";
import type { UsageRecorder } from "@/server/modules/metering/metering.service";
import { startProvisionTimings } from "@/server/modules/metrics/provision-timings";
import type { StageSampleRecorder } from "@/server/modules/metrics/stage-buffer.service";
import {
  admitWarmClaim,
  provisionAdmission,
  workspaceResources,
  type QuotaDeps,
  type WarmClaimAdmission,
} from "@/server/modules/quota/quota.service";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import {
  transitionFrom,
  transitionWithGeneration,
  type WorkspaceRecord,
} from "@/server/modules/workspace/workspace-lifecycle.data";
import { specOfRecord } from "@/server/modules/workspace/workspace-spec";
import { isAppError } from "@/server/shared/errors";
import type { BackendHandle } from "@/server/workspace/drivers/driver";
import {
  claimIdleMachine,
  deleteWarmMachine,
  recordPoolUse,
  type ClaimedWarmMachine,
} from "./warm-pool.data";
import { poolingDriver } from "./warm-pool.service";

/**
 * A first use served where it is asked for (the API's provision gate), without the workers: the record
 * enters PROVISIONING with the provision claim and a warm machine claimed in one transaction (quota
 * admission first, as for any provision), the driver binds the machine, and the record is READY with its
 * handle. The round trip through the job queue, two job transitions and the gate's wait cost far more than
 * the claim and the bind (issue 26: a workspace in under 50 ms), and nothing here needs a worker: binding is
 * a few renames and labels, not a create.
 *
 * Anything else goes to the workers as before (the caller's fallback), at once:
 * - not a first use, no pool for the driver, or an empty pool (nothing changed: the transaction rolled back,
 *   and the workers' run looks at the pool again and counts the use);
 * - the tenant reached its `warmClaimsPerMinute` (the claim rolled back, the machine left to other tenants;
 *   the workers' run finds the limit too and creates the machine cold, a `pool_miss`);
 * - another run moved the record first (two replicas first-using one workspace: the loser's transition
 *   finds it PROVISIONING, claims nothing, and waits for the winner through the workers' path);
 * - a bind that failed: the machine is discarded, the claim let go, and the workers' run takes the
 *   PROVISIONING record over with another machine or a create.
 */
export type WarmFirstUseDeps = {
  drivers: DriverSet;
  config: WarmPoolConfig;
  db: Db;
  quota: () => QuotaDeps;
  usage: () => UsageRecorder;
  stageSamples: () => StageSampleRecorder;
  lifecycle: LifecycleEvents;
  /** Enqueues `pool.refill`: a claim took a machine, or found the pool empty. */
  requestPoolRefill: () => Promise<unknown>;
  /** Enqueues `workspace.stop`: the tenant was suspended while its workspace was being bound. */
  requestStop: (payload: { tenantId: string; workspaceId: string; reason: string }) => Promise<unknown>;
  /** How long the provision claim holds unless renewed (the workers' job lock; default 30 s). */
  provisionClaimMs?: number;
  log: Logger;
};

/** The transaction found no idle machine: it rolls back and the caller goes to the workers. */
class PoolEmpty extends Error {}

/** The tenant reached its `warmClaimsPerMinute`: the claim rolls back and the workers create cold. */
class TenantLimited extends Error {}

/** A workspace with no machine and no data: a first provision, a failed first one, or after a purge. */
function isFirstUse(record: WorkspaceRecord): boolean {
  if (record.state === "PURGED") return true;
  return (record.state === "PENDING" || record.state === "FAILED") && record.backendHandle === null;
}

/**
 * The READY record of `record`'s workspace served from its driver's warm pool, or null when the pool
 * cannot serve it here (see the module comment). Quota refusals and a suspended tenant throw, typed.
 */
export async function warmFirstUse(
  deps: WarmFirstUseDeps,
  record: WorkspaceRecord,
): Promise<WorkspaceRecord | null> {
  if (!isFirstUse(record)) return null;
  const driver = poolingDriver(deps.drivers.forKind(record.backendKind));
  if (!driver || !deps.config.pools[driver.kind]) return null;
  const { db, log } = deps;
  const startedAt = Date.now();
  const [scope, { resources, size, limits }, poolKey] = await Promise.all([
    resolveSystemTenantScope(record.tenantId, {}, db),
    workspaceResources(record.tenantId, deps.quota(), db),
    driver.warmPoolKey(),
  ]);
  const spec = {
    ...specOfRecord(record),
    resources,
    // A generation after a purge starts without the old handle: its machine is gone.
    ...(record.state === "PURGED" ? { handle: null } : {}),
  };
  const admit = provisionAdmission(record.tenantId, record.id, deps.quota());
  const run = newProvisionRun(record.id, deps.provisionClaimMs ?? DEFAULT_PROVISION_CLAIM_MS, log, db);
  let claimed: ClaimedWarmMachine | null = null;
  let counted: WarmClaimAdmission | null = null;
  try {
    await transitionFrom(
      scope,
      record.id,
      {
        from: [record.state],
        to: "PROVISIONING",
        reason: `first use (was ${record.state}): a warm machine`,
        // The claim first: an empty pool rolls back before anything consumes the tenant's windows in
        // Redis. Then the tenant's warm claim (counted at once, atomically, so concurrent first uses never
        // pass the limit; given back below should the transaction not commit), then the provision's
        // admission, whose provisions-per-minute unit no rollback would give back: a tenant over its warm
        // limit goes to the workers without having consumed one here.
        async admit(tx) {
          claimed = await claimIdleMachine(driver.kind, poolKey, record.id, tx);
          if (!claimed) throw new PoolEmpty();
          counted = await admitWarmClaim(record.tenantId, limits.warmClaimsPerMinute, deps.quota());
          if (!counted) throw new TenantLimited();
          await admit(tx);
        },
        provisionClaim: run.claim,
      },
      db,
    );
  } catch (error) {
    run.drop();
    // Nothing was bound: a warm claim counted before the transaction failed is given back.
    releaseCounted(deps, counted);
    // Empty or over the tenant's warm limit: the workers' run looks at the pool and the limit once more (a
    // refill may have made a machine since) and counts the use, hit or miss, once. Moved on by another run
    // meanwhile: the workers' path waits for it.
    if (error instanceof PoolEmpty || error instanceof TenantLimited) return null;
    if (isAppError(error) && error.code === "CONFLICT") return null;
    throw error;
  }
  const machine: ClaimedWarmMachine = claimed!;
  const warmClaim: WarmClaimAdmission = counted!;
  const claim = run.hold();
  const timings = startProvisionTimings(
    { requestedAt: startedAt, pickedUpAt: startedAt },
    record,
    deps.stageSamples(),
    (error) => log.warn({ err: error }, "could not buffer stage timings"),
  );
  timings.pooled("warm");
  void deps
    .requestPoolRefill()
    .catch((error: unknown) => log.warn({ err: error }, "could not ask for a warm pool refill"));
  let handle: BackendHandle;
  try {
    handle = await driver.bindIdleMachine(machine.id, machine.handle, spec);
  } catch (error) {
    log.warn(
      { err: error, machine: machine.id, workspaceId: record.id },
      "could not bind a warm machine; the workers provision the workspace instead",
    );
    // Not bound, so nobody's: discarded (should that fail, the refill retries its CLAIMED row).
    void driver
      .discardIdleMachine(machine.id, machine.handle)
      .then(() => deleteWarmMachine(machine.id, db))
      .catch((discardError: unknown) =>
        log.warn({ err: discardError, machine: machine.id }, "could not discard an unbindable warm machine"),
      );
    await claim.end();
    // The workers' run claims another machine (or creates one) and counts that claim itself.
    releaseCounted(deps, warmClaim);
    return null;
  }
  timings.progress("pool.bound");
  // A hit once bound (a failed bind is the workers' run to count).
  void recordPoolUse(driver.kind, true, db).catch((error: unknown) =>
    log.warn({ err: error }, "could not record a warm pool use"),
  );
  let generation: number;
  try {
    ({ generation } = await transitionWithGeneration(
      scope,
      record.id,
      {
        from: ["PROVISIONING"],
        to: "READY",
        reason: "provisioned",
        backendHandle: handle,
        meteredSize: size,
        step: { kind: "provisioning", reason: `pool.bound: ${machine.id}`, data: { step: "pool.bound" } },
      },
      db,
    ));
    // READY cleared the claim with the state.
    claim.settled();
  } catch (error) {
    // The bound machine is the workspace's whatever happens next: its handle kept on the record (as the
    // workers' path keeps it) restarts that machine on the retry instead of claiming another.
    await storeHandleWhileProvisioning(record.id, handle, db).catch(() => undefined);
    await claim.end();
    throw error;
  }
  timings.done(true);
  afterReady(deps, record, machine.id, size, timings.path);
  // As READY left it, without reading it back: a caller takes the state, the handle and the generation.
  return { ...record, state: "READY", backendHandle: handle, generation };
}

/** Gives back a warm claim that bound nothing, off the caller's path (a failure leaves it for the minute). */
function releaseCounted(deps: WarmFirstUseDeps, counted: WarmClaimAdmission | null): void {
  void counted
    ?.release()
    .catch((error: unknown) => deps.log.warn({ err: error }, "could not give back a warm pool claim"));
}

/**
 * Off the caller's path once READY: the bound machine's pool row goes, the provision is metered, tenants'
 * webhooks hear `workspace.ready`, and a tenant suspended meanwhile gets its workspace stopped (the
 * suspension's own stop found it PROVISIONING, with nothing to stop).
 */
function afterReady(
  deps: WarmFirstUseDeps,
  record: WorkspaceRecord,
  machineId: string,
  size: string,
  path: string,
): void {
  const { db, log } = deps;
  void deleteWarmMachine(machineId, db).catch((error: unknown) =>
    log.warn({ err: error, machine: machineId }, "could not delete a bound warm machine's row"),
  );
  void meterProvision(deps.usage(), record, size, log);
  deps.lifecycle.emit(record.tenantId, "workspace.ready", {
    workspaceId: record.id,
    backend: record.backendKind,
    path,
  });
  void tenantAdmitsWork(record.tenantId, db)
    .then((admits) =>
      admits
        ? undefined
        : deps.requestStop({
            tenantId: record.tenantId,
            workspaceId: record.id,
            reason: "tenant suspended while provisioning",
          }),
    )
    .catch((error: unknown) => log.warn({ err: error }, "could not check a tenant after a warm first use"));
}
