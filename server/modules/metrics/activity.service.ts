import { z } from "zod";
import { assertCan } from "@/server/auth/policy";
import type { TenantScope } from "@/server/auth/scope";
import { activityCounts, type ActivityBucket } from "./activity.data";
import type { Db } from "@/server/db";

const ZBucket = z.object({ at: z.date(), ok: z.number().int(), failed: z.number().int() });
export const ZActivityView = z.object({
  startsPerHour: z.array(ZBucket),
  turnsPerDay: z.array(ZBucket),
});

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Every bucket from the first to the current one (UTC), zero where nothing happened. */
function filled(rows: ActivityBucket[], unitMs: number, count: number, now: number): ActivityBucket[] {
  const byTime = new Map(rows.map((row) => [row.at.getTime(), row]));
  const last = Math.floor(now / unitMs) * unitMs;
  return Array.from({ length: count }, (_, index) => {
    const at = last - (count - 1 - index) * unitMs;
    return byTime.get(at) ?? { at: new Date(at), ok: 0, failed: 0 };
  });
}

/** The Overview's pictures: workspace starts per hour (24 h) and turns per day (14 days), ok and failed. */
export async function tenantActivity(scope: TenantScope, now = Date.now(), db: Db) {
  assertCan(scope, "tenant:read");
  const hoursFrom = new Date(Math.floor(now / HOUR) * HOUR - 23 * HOUR);
  const daysFrom = new Date(Math.floor(now / DAY) * DAY - 13 * DAY);
  const [starts, turns] = await Promise.all([
    activityCounts(scope, "provisions", "hour", hoursFrom, db),
    activityCounts(scope, "turns", "day", daysFrom, db),
  ]);
  return { startsPerHour: filled(starts, HOUR, 24, now), turnsPerDay: filled(turns, DAY, 14, now) };
}
