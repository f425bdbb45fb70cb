import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { loadOperationsConfig, type OtlpExportConfig } from "@/server/config/operations";
import type { RedisConfig } from "@/server/config/redis";
import { insertStageSamples } from "@/server/modules/metrics/metrics.data";
import { exportMetricsIfDue } from "@/server/modules/metrics/otlp-export.service";
import { renderMetrics } from "@/server/modules/metrics/prometheus.service";
import { ZStageSample } from "@/server/modules/metrics/stage-sample.schema";
import { jobCatalog, type BerthJobCatalog } from "@/server/queue/catalog";
import { createQueues, type QueueSet } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import {
  type OtlpReceiver,
  type ReceivedExport,
  startOtlpReceiver,
} from "@/test/fixtures/otlp-receiver/server";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { isolatedRedisConfig, testLog } from "../queue/queue-fixtures";
import { parseExposition } from "./prometheus-exposition";
import { processBerth } from "@/server/composition/process-berth";

function metricOf(entry: ReceivedExport, name: string) {
  return entry.body.resourceMetrics[0]!.scopeMetrics[0]!.metrics.find((metric) => metric.name === name);
}
const attributesOf = (point: { attributes: { key: string; value: unknown }[] }) =>
  Object.fromEntries(
    point.attributes.map(({ key, value }) => [key, (value as { stringValue?: string }).stringValue]),
  );

// The worker process exporting on its own flush ticks when OTEL_EXPORTER_OTLP_ENDPOINT is set is checked on
// the `npm run workers` process test/integration/workers/main-process.test.ts starts anyway (a worker
// process costs seconds of CPU to start).
describe("OpenTelemetry export (OTLP/HTTP JSON) of the /api/metrics figures, real Postgres and Redis", () => {
  let receiver: OtlpReceiver;
  let redis: RedisConfig;
  let connection: Redis;
  let queues: QueueSet<BerthJobCatalog>;
  let tenant: TestTenant;
  // A backend label no other test writes, so this file's figures are exact while others run.
  const backend = `otlp-${Math.random().toString(36).slice(2, 8)}`;
  const configFor = (intervalMs: number): OtlpExportConfig => ({
    ...loadOperationsConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.endpoint}/`,
      OTEL_EXPORTER_OTLP_HEADERS: "Authorization=Bearer%20collector-key,x-tenant=ops",
      OTEL_SERVICE_NAME: "berth-test",
    }).otlp!,
    intervalMs,
  });
  const deps = () => ({
    db: processBerth().db,
    redis: connection,
    redisPrefix: redis.prefix,
    startedAt: new Date(Date.now() - 60_000),
    queues: queues.all(),
  });

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    redis = isolatedRedisConfig();
    connection = createRedisConnection(redis, "producer", "test-otlp");
    queues = createQueues(jobCatalog, { connection, redis, log: testLog });
    tenant = await createTestTenant();
    const base = {
      tenantId: tenant.tenantId,
      kind: "provision",
      backend,
      path: "cold",
      at: new Date(),
    } as const;
    await insertStageSamples(
      [
        { ...base, stage: "total", durationMs: 80 },
        { ...base, stage: "total", durationMs: 1_200 },
        { ...base, stage: "total", durationMs: 400_000, ok: false },
      ].map((sample) => ZStageSample.parse(sample)),
      processBerth().db,
    );
  });
  afterAll(async () => {
    await queues.close();
    await connection.quit();
    await receiver.close();
  });

  it("maps the standard OTEL_* variables, and refuses a protocol it does not speak with a clear message", () => {
    const config = loadOperationsConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: "https://collector.example:4318",
      OTEL_EXPORTER_OTLP_HEADERS: "api-key=a%3Db",
    }).otlp;
    expect(config).toEqual({
      metricsUrl: "https://collector.example:4318/v1/metrics",
      headers: { "api-key": "a=b" },
      intervalMs: 60_000,
      serviceName: "berth",
    });
    // The signal's own URL is used as given.
    expect(
      loadOperationsConfig({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "https://c.example/otlp/metrics" }).otlp
        ?.metricsUrl,
    ).toBe("https://c.example/otlp/metrics");
    expect(loadOperationsConfig({}).otlp).toBeNull();
    expect(() =>
      loadOperationsConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: "https://c.example",
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
      }),
    ).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL: Berth exports OTLP as http\/json only/);
  });

  it("sends the same figures as /api/metrics, in a request the collector accepts", async () => {
    expect(await exportMetricsIfDue(configFor(60_000), deps())).toBe("exported");
    expect(receiver.refused).toEqual([]);
    const entry = receiver.received.at(-1)!;
    expect(entry.headers.authorization).toBe("Bearer collector-key");
    expect(entry.headers["x-tenant"]).toBe("ops");
    expect(attributesOf(entry.body.resourceMetrics[0]!.resource)).toMatchObject({
      "service.name": "berth-test",
    });

    const stages = metricOf(entry, "berth_stage_duration_seconds");
    if (!stages || !("histogram" in stages)) throw new Error("no stage histogram");
    expect(stages.unit).toBe("s");
    expect(stages.histogram.aggregationTemporality).toBe(2);
    const points = stages.histogram.dataPoints.filter((point) => attributesOf(point).backend === backend);
    const ok = points.find((point) => attributesOf(point).outcome === "ok")!;
    const failed = points.find((point) => attributesOf(point).outcome === "failed")!;
    // 80 ms falls in (0.05, 0.1], 1.2 s in (1, 2.5]; 400 s is past the last bound (300 s): the overflow bucket.
    expect(ok.count).toBe("2");
    expect(ok.bucketCounts).toEqual(["0", "1", "0", "0", "0", "1", "0", "0", "0", "0", "0", "0", "0"]);
    expect(ok.sum).toBeCloseTo(1.28);
    expect(failed.bucketCounts.at(-1)).toBe("1");
    expect(Number(ok.startTimeUnixNano)).toBeLessThan(Number(ok.timeUnixNano));

    // Counters are monotonic cumulative sums named without `_total` (a Prometheus translation adds it).
    const provisions = metricOf(entry, "berth_provisions");
    if (!provisions || !("sum" in provisions)) throw new Error("no provisions counter");
    expect(provisions.sum.isMonotonic).toBe(true);
    const exported = provisions.sum.dataPoints
      .filter((point) => attributesOf(point).backend === backend)
      .map((point) => [attributesOf(point).outcome, point.asDouble]);
    expect(Object.fromEntries(exported)).toEqual({ ok: 2, failed: 1 });

    // The same numbers the scrape endpoint shows.
    const { samples } = parseExposition(await renderMetrics(processBerth().db, { queues: queues.all() }));
    const scraped = samples.filter(
      (sample) => sample.name === "berth_provisions_total" && sample.labels.backend === backend,
    );
    expect(Object.fromEntries(scraped.map((sample) => [sample.labels.outcome, sample.value]))).toEqual({
      ok: 2,
      failed: 1,
    });
    const depth = metricOf(entry, "berth_queue_depth");
    if (!depth || !("gauge" in depth)) throw new Error("no queue depth gauge");
    expect(depth.gauge.dataPoints.map((point) => attributesOf(point).queue).sort()).toEqual(
      queues
        .all()
        .map((queue) => queue.name)
        .sort(),
    );
  });

  it("exports once per interval whichever worker's tick comes first, and retries a collector that was down at the next", async () => {
    await connection.del(`${redis.prefix}:metrics:otlp-export`);
    const before = receiver.received.length;
    const outcomes = await Promise.all([1, 2, 3].map(() => exportMetricsIfDue(configFor(60_000), deps())));
    expect(outcomes.sort()).toEqual(["exported", "not-due", "not-due"]);
    expect(receiver.received.length).toBe(before + 1);

    // Down: the export is UNAVAILABLE (the flush logs it and succeeds), and the claim stays for the
    // interval, so the next try is the next interval's, not every 5 s tick's.
    const short = configFor(3_000);
    await connection.del(`${redis.prefix}:metrics:otlp-export`);
    receiver.failNext(503);
    await expect(exportMetricsIfDue(short, deps())).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(await exportMetricsIfDue(short, deps())).toBe("not-due");
    await vi.waitFor(async () => expect(await exportMetricsIfDue(short, deps())).toBe("exported"), {
      timeout: 30_000,
      interval: 250,
    });
  });
});
