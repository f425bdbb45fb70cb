import { processBerth } from "@/server/composition/process-berth";
import { assertMetricsToken, renderMetrics } from "@/server/modules/metrics/prometheus.service";
import { toRouteError } from "@/server/api/error-mapping";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

/**
 * GET /api/metrics: Prometheus text format, for a scraper holding BERTH_METRICS_TOKEN
 * (`Authorization: Bearer <token>`). 404 while no token is configured, 401 for a wrong one.
 */
export async function GET(request: Request): Promise<Response> {
  try {
    // Entered by Next: the process' Berth comes through its one handle.
    const berth = processBerth();
    assertMetricsToken(berth.config.operations.metricsToken, request.headers.get("authorization"));
    const body = await renderMetrics(berth.db, { queues: berth.queues.all() });
    return new Response(body, {
      headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8", "cache-control": "no-store" },
    });
  } catch (error) {
    const { status, body } = toRouteError(error);
    return Response.json(body, { status, headers: { "cache-control": "no-store" } });
  }
}
