import { secretKeyFromBytes } from "@/server/auth/secrets";
import type { Db } from "@/server/db";
import { createDriverSet } from "@/server/engine/driver-set";
import { createEngine, type CreateEngineOptions, type WorkspaceEngine } from "@/server/engine/engine";
import { NO_WARM_POOLS } from "@/server/engine/warm-pool-config";
import { tenantDriverSettings } from "@/server/modules/backend-settings/backend-settings.service";
import { ensureInstallationId } from "@/server/modules/installation/installation.data";
import { createProvisionGate } from "@/server/modules/machines/provision-gate";
import type { AttachTracker } from "@/server/modules/metrics/attach-tracker";
import type { StageSampleRecorder } from "@/server/modules/metrics/stage-buffer.service";
import type { UsageRecorder } from "@/server/modules/metering/metering.service";
import { warmFirstUse } from "@/server/modules/pool/warm-first-use.service";
import type { QuotaDeps } from "@/server/modules/quota/quota.service";
import { listTenantIdleTtlsBelow } from "@/server/modules/tenant/tenant-policy.data";
import type { LifecycleEvents } from "@/server/modules/webhook/webhook-events";
import type { WorkspaceRecord } from "@/server/modules/workspace/workspace-lifecycle.data";
import { createEnqueue } from "@/server/queue/enqueue";

/** An engine whose cache misses go through the workers (the provision gate over its queues). */
export function composeEngine(
  options: Omit<CreateEngineOptions, "ensureProvisioned"> & {
    encryptionKey: Buffer;
    db: Db;
    /** Quota checks before a provision is asked for (the root's `quota`). */
    quota: () => QuotaDeps;
    /** The root's attach tracker (the provision's path, for this process' attach timing). */
    attachTracker: () => AttachTracker;
    /** A warm first use's metering, stage timings and `workspace.ready` (the root's). */
    usage: () => UsageRecorder;
    stageSamples: () => StageSampleRecorder;
    lifecycle: LifecycleEvents;
  },
): WorkspaceEngine {
  const {
    config,
    queues,
    log,
    encryptionKey,
    db,
    quota,
    attachTracker,
    usage,
    stageSamples,
    lifecycle,
    ...rest
  } = options;
  const engineLog = log.child({ component: "workspace-engine" });
  // The database's installation id labels every shared-engine resource (reconcile touches only its own);
  // tenants' own backend settings (an E2B team's key, sealed) come from the database too.
  const drivers =
    rest.drivers ??
    createDriverSet(config, undefined, {
      installationId: () => ensureInstallationId(db),
      tenantSettings: tenantDriverSettings(secretKeyFromBytes(encryptionKey), db),
    });
  const enqueue = createEnqueue(queues);
  const warmPools = config.warmPools ?? NO_WARM_POOLS;
  const ensureProvisioned = createProvisionGate({
    db,
    quota,
    attachTracker,
    queues,
    waitMs: config.provisionWaitMs,
    log: engineLog,
    // A first use from a warm pool is bound here, not by the workers (warm-first-use.service.ts).
    ...(Object.keys(warmPools.pools).length > 0
      ? {
          warmFirstUse: (record: WorkspaceRecord) =>
            warmFirstUse(
              {
                drivers,
                config: warmPools,
                db,
                quota,
                usage,
                stageSamples,
                lifecycle,
                requestPoolRefill: () => enqueue("pool.refill", { trigger: "claim" }),
                requestStop: (payload) => enqueue("workspace.stop", payload),
                log: engineLog,
              },
              record,
            ),
        }
      : {}),
  });
  return createEngine({
    drivers,
    // Each tenant's own idle TTL (its policy; the installation's caps it) for the cache, as for the sweep.
    tenantIdleTtls: async () =>
      new Map(
        (await listTenantIdleTtlsBelow(config.idleTtlMs, db)).map(({ tenantId, idleTtlMs }) => [
          tenantId,
          idleTtlMs,
        ]),
      ),
    config,
    queues,
    log,
    ...rest,
    ensureProvisioned,
  });
}
