import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import type { RedisConfig } from "@/server/config/redis";
import { insertStageSamples } from "@/server/modules/metrics/metrics.data";
import { assertMetricsToken, renderMetrics } from "@/server/modules/metrics/prometheus.service";
import { ZStageSample } from "@/server/modules/metrics/stage-sample.schema";
import { upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { jobCatalog, type BerthJobCatalog } from "@/server/queue/catalog";
import { createEnqueue } from "@/server/queue/enqueue";
import { createQueues, type QueueSet } from "@/server/queue/queues";
import { createRedisConnection } from "@/server/redis";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { isolatedRedisConfig, testLog } from "../queue/queue-fixtures";
import { parseExposition, type ParsedSample } from "./prometheus-exposition";
import { processBerth } from "@/server/composition/process-berth";

describe("/api/metrics exposition (real Postgres and Redis)", () => {
  let redis: RedisConfig;
  let connection: Redis;
  let queues: QueueSet<BerthJobCatalog>;
  let tenant: TestTenant;
  // A backend label no other test writes, so this file's figures are exact while others run.
  const backend = `probe-${Math.random().toString(36).slice(2, 8)}`;

  beforeAll(async () => {
    redis = isolatedRedisConfig();
    connection = createRedisConnection(redis, "producer", "test-metrics");
    queues = createQueues(jobCatalog, { connection, redis, log: testLog });
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await queues.close();
    await connection.quit();
  });

  const find = (samples: ParsedSample[], name: string, labels: Record<string, string>) =>
    samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

  it("exposes workspaces, provisions, stage histograms and queue depth in a format Prometheus parses", async () => {
    const at = new Date();
    const base = { tenantId: tenant.tenantId, kind: "provision", backend, path: "cold", at } as const;
    await insertStageSamples(
      [
        { ...base, stage: "total", durationMs: 80 },
        { ...base, stage: "total", durationMs: 1_200 },
        { ...base, stage: "total", durationMs: 400_000, ok: false },
        { ...base, kind: "turn", path: "turn", stage: "model", durationMs: 30 },
      ].map((s) => ZStageSample.parse(s)),
      processBerth().db,
    );
    await upsertWorkspaceBinding(
      tenant.scope,
      {
        id: `ws-metrics-${backend}`,
        backendKind: "local",
        isolationPolicy: "PER_AGENT",
      },
      { config: processBerth().config.quotas },
      processBerth().db,
    );
    const enqueue = createEnqueue(queues);
    await enqueue("metrics.flush", { trigger: "manual" });
    await enqueue("metrics.flush", { trigger: "manual" });

    const { types, samples } = parseExposition(
      await renderMetrics(processBerth().db, { queues: queues.all() }),
    );
    expect(types.get("berth_stage_duration_seconds")).toBe("histogram");
    expect(types.get("berth_provisions_total")).toBe("counter");

    expect(find(samples, "berth_provisions_total", { backend, path: "cold", outcome: "ok" })[0]?.value).toBe(
      2,
    );
    expect(
      find(samples, "berth_provisions_total", { backend, path: "cold", outcome: "failed" })[0]?.value,
    ).toBe(1);
    expect(find(samples, "berth_turns_total", { backend, outcome: "ok" })[0]?.value).toBe(1);

    const okTotal = { kind: "provision", backend, path: "cold", stage: "total", outcome: "ok" };
    const buckets = find(samples, "berth_stage_duration_seconds_bucket", okTotal);
    const le = (bound: string) => buckets.find((b) => b.labels.le === bound)?.value;
    expect([le("0.05"), le("0.1"), le("1"), le("2.5"), le("+Inf")]).toEqual([0, 1, 1, 2, 2]);
    expect(find(samples, "berth_stage_duration_seconds_sum", okTotal)[0]?.value).toBeCloseTo(1.28, 6);
    // The failed 400 s provision lies beyond the last bound: only +Inf counts it.
    const failed = find(samples, "berth_stage_duration_seconds_bucket", { ...okTotal, outcome: "failed" });
    expect(failed.find((b) => b.labels.le === "300")?.value).toBe(0);
    expect(failed.find((b) => b.labels.le === "+Inf")?.value).toBe(1);

    expect(
      find(samples, "berth_workspaces", { state: "PENDING", backend: "local" })[0]?.value,
    ).toBeGreaterThan(0);
    // Two waiting flushes on the metrics queue (no worker runs on this prefix).
    expect(find(samples, "berth_queue_depth", { queue: "metrics" })[0]?.value).toBe(2);
    expect(find(samples, "berth_jobs", { queue: "metrics", state: "waiting" })[0]?.value).toBe(2);
    expect(find(samples, "berth_jobs", { queue: "webhook", state: "failed" })[0]?.value).toBe(0);
  });

  it("answers 404 while no token is configured and 401 for a missing or wrong one", () => {
    const token = "t".repeat(40);
    expect(() => assertMetricsToken(null, `Bearer ${token}`)).toThrow(
      expect.objectContaining({ code: "NOT_FOUND" }),
    );
    expect(() => assertMetricsToken(token, null)).toThrow(expect.objectContaining({ code: "UNAUTHORIZED" }));
    expect(() => assertMetricsToken(token, `Bearer ${token}x`)).toThrow(
      expect.objectContaining({ code: "UNAUTHORIZED" }),
    );
    expect(() => assertMetricsToken(token, `Bearer ${token}`)).not.toThrow();
  });
});
