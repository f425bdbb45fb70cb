import { loadRedisConfig } from "@/server/config/redis";
import { loadWorkersConfig } from "@/server/config/workers";
import { getLogger } from "@/server/logger";
import { checkHealth } from "@/server/modules/health/health.service";
import { getRedis } from "@/server/redis";

// Always live: a cached health answer is a wrong health answer.
export const dynamic = "force-dynamic";
export const runtime = "nodejs";

/** GET /api/health → 200 when database, Redis and workers are all ok, 503 otherwise; JSON body. */
export async function GET(): Promise<Response> {
  const report = await checkHealth({
    redis: getRedis(),
    redisPrefix: loadRedisConfig().prefix,
    heartbeatTtlMs: loadWorkersConfig().heartbeatTtlMs,
    log: getLogger().child({ component: "health" }),
  });
  return Response.json(report, {
    status: report.status === "ok" ? 200 : 503,
    headers: { "cache-control": "no-store" },
  });
}
