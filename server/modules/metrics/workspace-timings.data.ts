import type { DbClient } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";

/** One workspace's stage timings (stage_samples) and its lifecycle timeline (events merged with provisions). */

export type WorkspaceStageRow = {
  kind: string;
  path: string;
  stage: string;
  count: number;
  p50: number;
  p95: number;
  maxMs: number;
  lastAt: Date;
};

/** Per (kind, path, stage) of the workspace over the retention window: count, p50, p95, max and latest. */
export async function workspaceStageSummary(
  scope: TenantScope,
  workspaceId: string,
  db: DbClient,
): Promise<WorkspaceStageRow[]> {
  const rows = await db.$queryRaw<
    {
      kind: string;
      path: string;
      stage: string;
      count: bigint;
      p: number[];
      max: number;
      last_at: Date;
    }[]
  >`
    SELECT kind, path, stage, count(*) AS count,
           percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY duration_ms) AS p,
           max(duration_ms) AS max, max(at) AS last_at
      FROM stage_samples
     WHERE tenant_id = ${scope.tenantId} AND workspace_id = ${workspaceId}
     GROUP BY kind, path, stage
     ORDER BY kind, path, stage`;
  return rows.map((row) => ({
    kind: row.kind,
    path: row.path,
    stage: row.stage,
    count: Number(row.count),
    p50: Math.round(row.p[0]! * 1_000) / 1_000,
    p95: Math.round(row.p[1]! * 1_000) / 1_000,
    maxMs: row.max,
    lastAt: row.last_at,
  }));
}

export type ProvisionRun = {
  at: Date;
  path: string;
  ok: boolean;
  queuedMs: number | null;
  machineMs: number | null;
  gatewayMs: number | null;
  totalMs: number | null;
};

/**
 * The workspace's latest provisions, newest first, one row per provision: a job records all its stages with
 * the same `at` (its end), so they group by it.
 */
export async function recentProvisionRuns(
  scope: TenantScope,
  workspaceId: string,
  limit: number,
  db: DbClient,
): Promise<ProvisionRun[]> {
  const rows = await db.$queryRaw<
    {
      at: Date;
      path: string;
      ok: boolean;
      queued: number | null;
      machine: number | null;
      gateway: number | null;
      total: number | null;
    }[]
  >`
    SELECT at, path, bool_and(ok) AS ok,
           max(duration_ms) FILTER (WHERE stage = 'queued') AS queued,
           max(duration_ms) FILTER (WHERE stage = 'machine') AS machine,
           max(duration_ms) FILTER (WHERE stage = 'gateway') AS gateway,
           max(duration_ms) FILTER (WHERE stage = 'total') AS total
      FROM stage_samples
     WHERE tenant_id = ${scope.tenantId} AND workspace_id = ${workspaceId} AND kind = 'provision'
     GROUP BY at, path
     ORDER BY at DESC
     LIMIT ${limit}`;
  return rows.map((row) => ({
    at: row.at,
    path: row.path,
    ok: row.ok,
    queuedMs: row.queued,
    machineMs: row.machine,
    gatewayMs: row.gateway,
    totalMs: row.total,
  }));
}

export type TimelineRow =
  | {
      source: "event";
      key: string;
      at: Date;
      kind: string;
      reason: string | null;
      actor: string;
      data: unknown;
    }
  | {
      source: "stage";
      key: string;
      at: Date;
      kind: string;
      stage: string;
      path: string;
      durationMs: number;
      ok: boolean;
    };

/** The order of the timeline: time, then events before measurements, then the id (zero-padded for samples). */
export type TimelineCursor = { at: Date; rank: number; key: string };

/**
 * The newest `limit` entries before `before` (exclusive), newest first: the workspace's events (every
 * kind: transitions, bumps, leases) and its provisions and attaches (their `total` and `attach` stages; a
 * turn's stages stay out, a busy workspace would drown its lifecycle in them). One SQL, one order, so
 * pages never overlap or skip entries that share a millisecond.
 */
export async function workspaceTimelinePage(
  scope: TenantScope,
  workspaceId: string,
  options: { before: TimelineCursor | null; limit: number },
  db: DbClient,
): Promise<(TimelineRow & { rank: number })[]> {
  const before = options.before;
  const rows = await db.$queryRaw<
    {
      rank: number;
      key: string;
      at: Date;
      kind: string;
      reason: string | null;
      actor: string | null;
      data: unknown;
      stage: string | null;
      path: string | null;
      duration_ms: number | null;
      ok: boolean | null;
    }[]
  >`
    SELECT * FROM (
      -- workspace_events.at is a UTC timestamp without a zone; stage_samples.at a timestamptz.
      SELECT 0 AS rank, id AS key, at AT TIME ZONE 'UTC' AS at, kind::text AS kind, reason, actor, data,
             NULL::text AS stage, NULL::text AS path, NULL::int AS duration_ms, NULL::boolean AS ok
        FROM workspace_events
       WHERE tenant_id = ${scope.tenantId} AND workspace_id = ${workspaceId}
      UNION ALL
      SELECT 1 AS rank, lpad(id::text, 20, '0') AS key, at, kind, NULL, NULL, NULL,
             stage, path, duration_ms, ok
        FROM stage_samples
       WHERE tenant_id = ${scope.tenantId} AND workspace_id = ${workspaceId}
         AND ((kind = 'provision' AND stage = 'total') OR (kind = 'attach' AND stage = 'attach'))
    ) AS timeline
     WHERE ${before === null}
        OR (at, rank, key) < (${before?.at ?? new Date(0)}::timestamptz, ${before?.rank ?? 0}::int, ${before?.key ?? ""}::text)
     ORDER BY at DESC, rank DESC, key DESC
     LIMIT ${options.limit}`;
  return rows.map((row) =>
    row.rank === 0
      ? {
          source: "event",
          rank: 0,
          key: row.key,
          at: row.at,
          kind: row.kind,
          reason: row.reason,
          actor: row.actor ?? "",
          data: row.data,
        }
      : {
          source: "stage",
          rank: 1,
          key: row.key,
          at: row.at,
          kind: row.kind,
          stage: row.stage ?? "",
          path: row.path ?? "",
          durationMs: row.duration_ms ?? 0,
          ok: row.ok ?? true,
        },
  );
}
