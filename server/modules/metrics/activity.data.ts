import type { DbClient } from "@/server/db";
import type { TenantScope } from "@/server/auth/scope";

export type ActivityBucket = { at: Date; ok: number; failed: number };

/**
 * Counts of the tenant's provisions (their `total` stage) or turns (their `model` stage) per hour or day
 * since `from`, split by outcome. Only buckets with samples come back; the service fills the gaps.
 */
export async function activityCounts(
  scope: TenantScope,
  what: "provisions" | "turns",
  unit: "hour" | "day",
  from: Date,
  db: DbClient,
): Promise<ActivityBucket[]> {
  const [kind, stage] = what === "provisions" ? ["provision", "total"] : ["turn", "model"];
  // `unit` is one of two literals (typed), passed as a bind parameter: date_trunc takes it as text.
  const rows = await db.$queryRaw<{ bucket: Date; ok: bigint; failed: bigint }[]>`
    SELECT date_trunc(${unit}, at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS bucket,
           count(*) FILTER (WHERE ok) AS ok, count(*) FILTER (WHERE NOT ok) AS failed
      FROM stage_samples
     WHERE tenant_id = ${scope.tenantId} AND kind = ${kind} AND stage = ${stage} AND at >= ${from}
     GROUP BY 1 ORDER BY 1`;
  return rows.map((row) => ({ at: row.bucket, ok: Number(row.ok), failed: Number(row.failed) }));
}
