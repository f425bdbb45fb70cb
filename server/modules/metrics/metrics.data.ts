import { Prisma } from "@/generated/prisma/client";
import type { DbClient } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";
import type { TStageSample } from "./stage-sample.schema";

/** The only Prisma importer of the metrics module: stage samples in, percentiles and totals out. */

export async function insertStageSamples(samples: TStageSample[], db: DbClient): Promise<number> {
  if (samples.length === 0) return 0;
  // A sample of a tenant deleted meanwhile would fail the whole batch on its foreign key: skip it instead.
  const tenants = new Set(
    (
      await db.tenant.findMany({
        where: { id: { in: [...new Set(samples.map((s) => s.tenantId))] } },
        select: { id: true },
      })
    ).map((tenant) => tenant.id),
  );
  const rows = samples.filter((sample) => tenants.has(sample.tenantId));
  const { count } = await db.stageSample.createMany({ data: rows });
  return count;
}

export async function pruneStageSamplesBefore(cutoff: Date, db: DbClient): Promise<number> {
  const { count } = await db.stageSample.deleteMany({ where: { at: { lt: cutoff } } });
  return count;
}

export type StagePercentileRow = {
  kind: string;
  backend: string;
  path: string;
  stage: string;
  count: number;
  p50: number;
  p95: number;
  p99: number;
};

/**
 * p50/p95/p99 of each (kind, backend, path, stage) of the tenant in [from, to): PostgreSQL's
 * `percentile_cont`, i.e. linear interpolation between the two closest ranks (the definition used by
 * numpy's default and by most dashboards), in milliseconds.
 */
export async function stagePercentiles(
  scope: TenantScope,
  range: { from: Date; to: Date },
  db: DbClient,
): Promise<StagePercentileRow[]> {
  const rows = await db.$queryRaw<
    { kind: string; backend: string; path: string; stage: string; count: bigint; p: number[] }[]
  >`
    SELECT kind, backend, path, stage, count(*) AS count,
           percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY duration_ms) AS p
      FROM stage_samples
     WHERE tenant_id = ${scope.tenantId} AND at >= ${range.from} AND at < ${range.to}
     GROUP BY kind, backend, path, stage
     ORDER BY kind, backend, path, stage`;
  return rows.map((row) => ({
    kind: row.kind,
    backend: row.backend,
    path: row.path,
    stage: row.stage,
    count: Number(row.count),
    // Rounded to a microsecond: interpolation in floating point leaves 954.9999999999999 for 955.
    p50: roundMicro(row.p[0]!),
    p95: roundMicro(row.p[1]!),
    p99: roundMicro(row.p[2]!),
  }));
}

function roundMicro(ms: number): number {
  return Math.round(ms * 1_000) / 1_000;
}

/** The slowest provisions (their `total` stage) of the tenant in the range, slowest first. */
export async function slowestProvisions(
  scope: TenantScope,
  range: { from: Date; to: Date },
  limit: number,
  db: DbClient,
) {
  return db.stageSample.findMany({
    where: {
      tenantId: scope.tenantId,
      kind: "provision",
      stage: "total",
      workspaceId: { not: null },
      at: { gte: range.from, lt: range.to },
    },
    orderBy: [{ durationMs: "desc" }, { at: "desc" }],
    take: limit,
    select: { workspaceId: true, backend: true, path: true, durationMs: true, ok: true, at: true },
  });
}

// Prometheus histogram bucket bounds, in milliseconds (exposed in seconds).
export const STAGE_BUCKETS_MS = [
  50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000,
];

export type StageHistogramRow = {
  kind: string;
  backend: string;
  path: string;
  stage: string;
  ok: boolean;
  count: number;
  sumMs: number;
  /** Cumulative counts, one per STAGE_BUCKETS_MS bound. */
  buckets: number[];
};

/** Every stored sample (all tenants, the whole retention window), as cumulative histograms. */
export async function stageHistograms(db: DbClient): Promise<StageHistogramRow[]> {
  const totals = await db.$queryRaw<
    { kind: string; backend: string; path: string; stage: string; ok: boolean; count: bigint; sum: bigint }[]
  >`
    SELECT kind, backend, path, stage, ok, count(*) AS count, coalesce(sum(duration_ms), 0)::bigint AS sum
      FROM stage_samples GROUP BY kind, backend, path, stage, ok`;
  const perBound = await db.$queryRaw<
    { kind: string; backend: string; path: string; stage: string; ok: boolean; le: number; count: bigint }[]
  >`
    SELECT kind, backend, path, stage, ok, b.le, count(*) FILTER (WHERE duration_ms <= b.le) AS count
      FROM stage_samples CROSS JOIN unnest(ARRAY[${Prisma.join(STAGE_BUCKETS_MS)}]::int[]) AS b(le)
     GROUP BY kind, backend, path, stage, ok, b.le`;
  const keyOf = (row: { kind: string; backend: string; path: string; stage: string; ok: boolean }) =>
    [row.kind, row.backend, row.path, row.stage, String(row.ok)].join("\0");
  const buckets = new Map<string, number[]>();
  for (const row of perBound) {
    const list = buckets.get(keyOf(row)) ?? STAGE_BUCKETS_MS.map(() => 0);
    list[STAGE_BUCKETS_MS.indexOf(row.le)] = Number(row.count);
    buckets.set(keyOf(row), list);
  }
  return totals
    .map((row) => ({
      kind: row.kind,
      backend: row.backend,
      path: row.path,
      stage: row.stage,
      ok: row.ok,
      count: Number(row.count),
      sumMs: Number(row.sum),
      buckets: buckets.get(keyOf(row)) ?? STAGE_BUCKETS_MS.map(() => 0),
    }))
    .sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
}

/** Workspaces by state and backend (all tenants). */
export async function workspaceCounts(db: DbClient) {
  const rows = await db.workspace.groupBy({ by: ["state", "backendKind"], _count: { _all: true } });
  return rows.map((row) => ({ state: row.state, backend: row.backendKind, count: row._count._all }));
}

/** Warm pool machines per (backend kind, state) now (server/modules/pool/). */
export async function warmMachineCounts(db: DbClient) {
  const rows = await db.warmMachine.groupBy({ by: ["backendKind", "state"], _count: { _all: true } });
  return rows.map((row) => ({ backendKind: row.backendKind, state: row.state, count: row._count._all }));
}
