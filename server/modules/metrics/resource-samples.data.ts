import type { DbClient } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import type { WorkspaceRecord } from "@/server/modules/workspace/workspace-lifecycle.data";

/** Per-workspace resource samples (resource_samples): written by `metrics.sample`, charted per workspace. */

export type ResourceSampleInput = {
  tenantId: string;
  workspaceId: string;
  cpuSeconds: number | null;
  cpuPercent?: number | null;
  memoryBytes: number | null;
  diskBytes: number | null;
  processes: number | null;
  at: Date;
};

/** READY workspaces (all tenants) to sample, the least recently changed first, at most `limit`. */
export async function listReadyRecordsForSampling(
  limit: number,
  db: DbClient,
): Promise<
  Pick<
    WorkspaceRecord,
    "id" | "tenantId" | "userId" | "agentId" | "isolationPolicy" | "backendKind" | "backendHandle"
  >[]
> {
  return db.workspace.findMany({
    where: { state: "READY" },
    orderBy: { stateChangedAt: "asc" },
    take: limit,
    select: {
      id: true,
      tenantId: true,
      userId: true,
      agentId: true,
      isolationPolicy: true,
      backendKind: true,
      backendHandle: true,
    },
  });
}

export async function insertResourceSamples(samples: ResourceSampleInput[], db: DbClient): Promise<number> {
  if (samples.length === 0) return 0;
  const { count } = await db.resourceSample.createMany({
    data: samples.map((sample) => ({
      ...sample,
      memoryBytes: sample.memoryBytes === null ? null : BigInt(Math.round(sample.memoryBytes)),
      diskBytes: sample.diskBytes === null ? null : BigInt(Math.round(sample.diskBytes)),
    })),
  });
  return count;
}

export async function pruneResourceSamplesBefore(cutoff: Date, db: DbClient): Promise<number> {
  const { count } = await db.resourceSample.deleteMany({ where: { at: { lt: cutoff } } });
  return count;
}

export type ResourceBucket = {
  at: Date;
  cpuSeconds: number | null;
  /** The mean of the rates the backend reported itself (null when it reports cumulative time). */
  cpuPercent: number | null;
  memoryBytes: number | null;
  diskBytes: number | null;
  processes: number | null;
};

/**
 * The workspace's samples since `from`, in `bucketMs` buckets (oldest first), so a long range stays a
 * bounded number of points: the latest CPU time of a bucket (it is cumulative), the mean of reported CPU
 * rates, the mean memory, the largest disk and process count.
 */
export async function workspaceResourceBuckets(
  scope: TenantScope,
  workspaceId: string,
  options: { from: Date; bucketMs: number },
  db: DbClient,
): Promise<ResourceBucket[]> {
  const rows = await db.$queryRaw<
    {
      bucket: Date;
      cpu: number | null;
      cpu_rate: number | null;
      memory: number | null;
      disk: bigint | null;
      processes: number | null;
    }[]
  >`
    SELECT date_bin(${`${options.bucketMs} milliseconds`}::interval, at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS bucket,
           (array_agg(cpu_seconds ORDER BY at DESC))[1] AS cpu,
           avg(cpu_percent)::float8 AS cpu_rate,
           avg(memory_bytes)::float8 AS memory,
           max(disk_bytes) AS disk,
           max(processes) AS processes
      FROM resource_samples
     WHERE tenant_id = ${scope.tenantId} AND workspace_id = ${workspaceId} AND at >= ${options.from}
     GROUP BY 1 ORDER BY 1`;
  return rows.map((row) => ({
    at: row.bucket,
    cpuSeconds: row.cpu,
    cpuPercent: row.cpu_rate,
    memoryBytes: row.memory === null ? null : Math.round(row.memory),
    diskBytes: row.disk === null ? null : Number(row.disk),
    processes: row.processes,
  }));
}
