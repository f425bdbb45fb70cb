import { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import type { DriverSet } from "@/server/engine/driver-set";
import { specOfRecord } from "@/server/modules/workspace/workspace-spec";
import { assertMayActOnWorkspace } from "@/server/modules/workspace/workspace-access";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import type { Logger } from "@/server/logger";
import {
  insertResourceSamples,
  listReadyRecordsForSampling,
  pruneResourceSamplesBefore,
  type ResourceBucket,
  type ResourceSampleInput,
  workspaceResourceBuckets,
} from "./resource-samples.data";
import type { Db } from "@/server/db";

/**
 * Per-workspace CPU, memory, disk and processes: `metrics.sample` (a schedule, queue `metrics`) asks each
 * READY workspace's driver for `usage` (Docker: the container's stats; the confined local backend:
 * its cgroups, as root, and its folder's size; Kubernetes: the metrics API and an exec; E2B: the sandbox
 * metrics; a driver without it reports nothing) and stores one
 * row per workspace; the workspace page charts them.
 */

/** Every 15 s: a chart of the last hour has 240 points; a tick reads every READY workspace once. */
export const RESOURCE_SAMPLE_EVERY_MS = 15_000;
const MAX_WORKSPACES_PER_TICK = 500;
const USAGE_TIMEOUT_MS = 5_000;
const CONCURRENCY = 4;

export type ResourceSampleResult = { sampled: number; unsupported: number; failed: number; pruned: number };

export async function sampleWorkspaceResources(
  deps: {
    drivers: Pick<DriverSet, "forKind">;
    retentionDays: number;
    log?: Pick<Logger, "warn">;
    now?: () => Date;
  },
  db: Db,
): Promise<ResourceSampleResult> {
  const now = deps.now ?? (() => new Date());
  const records = await listReadyRecordsForSampling(MAX_WORKSPACES_PER_TICK, db);
  const samples: ResourceSampleInput[] = [];
  let unsupported = 0;
  let failed = 0;
  const queue = [...records];
  const worker = async () => {
    for (let record = queue.shift(); record; record = queue.shift()) {
      let driver;
      try {
        driver = deps.drivers.forKind(record.backendKind);
      } catch {
        unsupported += 1; // a backend this installation no longer runs
        continue;
      }
      if (!driver.usage) {
        unsupported += 1;
        continue;
      }
      try {
        const usage = await withTimeout(driver.usage(specOfRecord(record)), USAGE_TIMEOUT_MS);
        if (usage) samples.push({ tenantId: record.tenantId, workspaceId: record.id, ...usage, at: now() });
      } catch (error) {
        failed += 1;
        deps.log?.warn({ err: error, workspaceId: record.id }, "could not sample a workspace's resources");
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const sampled = await insertResourceSamples(samples, db);
  const pruned = await pruneResourceSamplesBefore(
    new Date(now().getTime() - deps.retentionDays * 86_400_000),
    db,
  );
  return { sampled, unsupported, failed, pruned };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const RANGES_MS = { "1h": 3_600_000, "6h": 6 * 3_600_000, "24h": 24 * 3_600_000 } as const;
/** At most this many points per chart, whatever the range. */
const MAX_POINTS = 240;

export const ZResourceRange = z.object({ range: z.enum(["1h", "6h", "24h"]).default("1h") });

export const ZWorkspaceResourcesView = z.object({
  /** The workspace's backend can report its resource use (false: nothing is sampled). */
  supported: z.boolean(),
  bucketMs: z.number().int(),
  points: z.array(
    z.object({
      at: z.date(),
      /** CPU use over the bucket before this one, in percent of one core; null across a restart. */
      cpuPercent: z.number().nullable(),
      memoryBytes: z.number().nullable(),
      diskBytes: z.number().nullable(),
      processes: z.number().int().nullable(),
    }),
  ),
});

/**
 * A rate from consecutive cumulative CPU times: a drop means the machine restarted (no rate across it).
 * Backends that report a rate themselves (Kubernetes, E2B) give it directly.
 */
function withCpuPercent(buckets: ResourceBucket[]) {
  return buckets.map((bucket, index) => {
    const before = buckets[index - 1];
    let cpuPercent: number | null =
      bucket.cpuPercent === null ? null : Math.round(bucket.cpuPercent * 1_000) / 1_000;
    if (before && before.cpuSeconds !== null && bucket.cpuSeconds !== null) {
      const seconds = (bucket.at.getTime() - before.at.getTime()) / 1_000;
      const used = bucket.cpuSeconds - before.cpuSeconds;
      if (used >= 0 && seconds > 0) cpuPercent = Math.round((used / seconds) * 100_000) / 1_000;
    }
    return {
      at: bucket.at,
      cpuPercent,
      memoryBytes: bucket.memoryBytes,
      diskBytes: bucket.diskBytes,
      processes: bucket.processes,
    };
  });
}

/** The workspace page's resource charts over the chosen range (whoever may read the workspace). */
export async function workspaceResources(
  scope: TenantScope,
  workspaceId: string,
  input: z.output<typeof ZResourceRange>,
  deps: { drivers: Pick<DriverSet, "forKind"> },
  now = Date.now(),
  db: Db,
): Promise<z.output<typeof ZWorkspaceResourcesView>> {
  assertCan(scope, "workspace:read");
  const record = await getWorkspace(scope, workspaceId, db);
  await assertMayActOnWorkspace(scope, record, db);
  let supported = false;
  try {
    supported = deps.drivers.forKind(record.backendKind).usage !== undefined;
  } catch {
    supported = false;
  }
  const rangeMs = RANGES_MS[input.range];
  const bucketMs = Math.max(RESOURCE_SAMPLE_EVERY_MS, Math.ceil(rangeMs / MAX_POINTS / 1_000) * 1_000);
  const buckets = await workspaceResourceBuckets(
    scope,
    workspaceId,
    {
      from: new Date(now - rangeMs),
      bucketMs,
    },
    db,
  );
  return { supported, bucketMs, points: withCpuPercent(buckets) };
}
