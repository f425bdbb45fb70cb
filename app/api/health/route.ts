import { processBerth } from "@/server/composition/process-berth";
import { checkHealth } from "@/server/modules/health/health.service";

// Always live: a cached health answer is a wrong health answer.
export const dynamic = "force-dynamic";
export const runtime = "nodejs";

/** GET /api/health → 200 when database, Redis and workers are all ok, 503 otherwise; JSON body. */
export async function GET(): Promise<Response> {
  // Entered by Next: the process' Berth comes through its one handle.
  const berth = processBerth();
  const report = await checkHealth({
    db: berth.db,
    redis: berth.redis,
    redisPrefix: berth.config.redis.prefix,
    heartbeatTtlMs: berth.config.workers.heartbeatTtlMs,
    log: berth.log.child({ component: "health" }),
  });
  return Response.json(report, {
    status: report.status === "ok" ? 200 : 503,
    headers: { "cache-control": "no-store" },
  });
}
