import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getDb } from "@/server/db";
import { insertStageSamples } from "@/server/modules/metrics/metrics.data";
import { tenantActivity } from "@/server/modules/metrics/activity.service";
import { readiness } from "@/server/modules/metrics/readiness.service";
import { ZStageSample } from "@/server/modules/metrics/stage-sample.schema";
import { flushStageSamples } from "@/server/modules/metrics/stage-buffer.service";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { addTestMember, createTestTenant, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { processBerth } from "@/server/composition/process-berth";

/** The process root's stage buffer (what the workers' `metrics.flush` drains). */
const stageBuffer = () => ({ redis: processBerth().redis, redisPrefix: processBerth().queues.redisPrefix });

const HOUR = 3_600_000;

describe("stage timings: recording, flush, retention and readiness percentiles (real Postgres, Redis, workers)", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;

  beforeAll(async () => {
    h = await startWorkspaceHarness();
    tenant = await createTestTenant();
  });
  afterAll(async () => {
    await h.close();
  });

  const rowsOf = (workspaceId: string) =>
    getDb().stageSample.findMany({
      where: { tenantId: tenant.tenantId, workspaceId },
      orderBy: { id: "asc" },
    });

  it("computes p50/p95/p99 per (kind, backend, path, stage) against a hand-checked set, within the tenant and range", async () => {
    const at = new Date(Date.now() - HOUR);
    const base = {
      tenantId: tenant.tenantId,
      kind: "provision",
      backend: "docker",
      path: "cold",
      at,
    } as const;
    const other = await createTestTenant();
    await insertStageSamples(
      [
        // 100..1000 ms: percentile_cont ranks p·(n−1) = 4.5, 8.55, 8.91 → 550, 955, 991 (interpolated).
        ...[700, 100, 1000, 300, 900, 200, 500, 800, 400, 600].map((ms) => ({
          ...base,
          stage: "machine",
          durationMs: ms,
        })),
        // One sample: every percentile is that sample.
        { ...base, path: "resume", stage: "machine", durationMs: 42 },
        // Outside the range, and another tenant's: neither counts.
        { ...base, stage: "machine", durationMs: 99_999, at: new Date(Date.now() - 30 * 24 * HOUR) },
        { ...base, tenantId: other.tenantId, stage: "machine", durationMs: 99_999 },
      ].map((sample) => ZStageSample.parse(sample)),
      processBerth().db,
    );
    const view = await readiness(
      tenant.scope,
      {
        from: new Date(Date.now() - 2 * HOUR),
        to: new Date(),
        slowest: 10,
      },
      processBerth().db,
    );
    const machine = view.stages.filter((s) => s.stage === "machine" && s.backend === "docker");
    expect(machine).toEqual([
      {
        kind: "provision",
        backend: "docker",
        path: "cold",
        stage: "machine",
        count: 10,
        p50: 550,
        p95: 955,
        p99: 991,
      },
      {
        kind: "provision",
        backend: "docker",
        path: "resume",
        stage: "machine",
        count: 1,
        p50: 42,
        p95: 42,
        p99: 42,
      },
    ]);
  });

  it("refuses readiness to members and viewers, and an inverted range", async () => {
    const member = await addTestMember(tenant, "member");
    const range = { from: new Date(Date.now() - HOUR), to: new Date(), slowest: 10 };
    await expect(readiness(member.scope, range, processBerth().db)).rejects.toMatchObject({
      code: "FORBIDDEN",
    });
    await expect(
      readiness(tenant.scope, { ...range, from: range.to, to: range.from }, processBerth().db),
    ).rejects.toMatchObject({
      code: "BAD_REQUEST",
    });
  });

  it("records a cold provision's stages and the attach in the buffer only; the flush stores them", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    h.machine.progressSteps = [{ step: "container.created" }, { step: "gateway.ready" }];
    try {
      await h.service.resolveForSession(tenant.scope, session.id);
    } finally {
      h.machine.progressSteps = [];
    }
    // Off the hot path: nothing in Postgres until the flush job (here called directly) runs.
    expect(await rowsOf(workspaceId)).toEqual([]);
    await vi.waitFor(
      async () => {
        await flushStageSamples({ retentionDays: 14 }, stageBuffer(), processBerth().db);
        const stages = (await rowsOf(workspaceId)).map((r) => `${r.kind}/${r.path}/${r.stage}`);
        expect(stages.sort()).toEqual(
          [
            "attach/cold/attach",
            "provision/cold/gateway",
            "provision/cold/machine",
            "provision/cold/queued",
            "provision/cold/total",
          ].sort(),
        );
      },
      { timeout: 15_000, interval: 200 },
    );
    const rows = await rowsOf(workspaceId);
    expect(new Set(rows.map((r) => r.backend))).toEqual(
      new Set([(await getWorkspace(tenant.scope, workspaceId, processBerth().db)).backendKind]),
    );
    const total = rows.find((r) => r.stage === "total")!;
    for (const part of rows.filter((r) => ["queued", "machine", "gateway"].includes(r.stage))) {
      expect(part.durationMs).toBeLessThanOrEqual(total.durationMs);
    }
  });

  it("tags a stopped workspace's next provision and attach as resume", async () => {
    const { session, workspaceId } = await freshSession(tenant.scope);
    await h.service.resolveForSession(tenant.scope, session.id);
    await h.service.requestStop(tenant.scope, workspaceId, { reason: "test stop" });
    await vi.waitFor(
      async () =>
        expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("STOPPED"),
      {
        timeout: 15_000,
      },
    );
    await h.service.resolveForSession(tenant.scope, session.id);
    await vi.waitFor(
      async () => {
        await flushStageSamples({ retentionDays: 14 }, stageBuffer(), processBerth().db);
        const paths = (await rowsOf(workspaceId)).filter((r) => r.stage === "total" || r.stage === "attach");
        expect(paths.map((r) => `${r.kind}/${r.path}`).sort()).toEqual(
          ["attach/cold", "attach/resume", "provision/cold", "provision/resume"].sort(),
        );
      },
      { timeout: 15_000, interval: 200 },
    );
  });

  it("counts starts per hour and turns per day for the Overview, zero-filled, ok and failed apart", async () => {
    const fresh = await createTestTenant();
    // Today 15:30 UTC (relative to the real date, so the retention prune of a parallel flush never applies).
    const today = Math.floor(Date.now() / (24 * HOUR)) * 24 * HOUR;
    const utc = (dayOffset: number, hour: number, minute = 0) =>
      today + dayOffset * 24 * HOUR + hour * HOUR + minute * 60_000;
    const now = utc(0, 15, 30);
    const sample = (kind: "provision" | "turn", at: number, ok = true) =>
      ZStageSample.parse({
        tenantId: fresh.tenantId,
        kind,
        backend: "local",
        path: kind === "turn" ? "turn" : "cold",
        stage: kind === "turn" ? "model" : "total",
        durationMs: 10,
        ok,
        at: new Date(at),
      });
    await insertStageSamples(
      [
        sample("provision", utc(0, 15, 5)),
        sample("provision", utc(0, 15, 29), false),
        sample("provision", utc(0, 13, 0)),
        sample("provision", utc(-1, 15, 0)), // 24.5 h ago: outside the 24 hourly buckets
        sample("turn", utc(0, 9, 0)),
        sample("turn", utc(-2, 23, 59), false),
      ],
      processBerth().db,
    );
    const activity = await tenantActivity(fresh.scope, now, processBerth().db);
    expect(activity.startsPerHour).toHaveLength(24);
    expect(activity.startsPerHour.at(-1)).toEqual({
      at: new Date(utc(0, 15)),
      ok: 1,
      failed: 1,
    });
    expect(activity.startsPerHour.at(-3)).toEqual({
      at: new Date(utc(0, 13)),
      ok: 1,
      failed: 0,
    });
    expect(activity.startsPerHour.reduce((n, b) => n + b.ok + b.failed, 0)).toBe(3);
    expect(activity.turnsPerDay).toHaveLength(14);
    expect(activity.turnsPerDay.at(-1)).toEqual({ at: new Date(utc(0, 0)), ok: 1, failed: 0 });
    expect(activity.turnsPerDay.at(-3)).toEqual({ at: new Date(utc(-2, 0)), ok: 0, failed: 1 });
  });

  it("prunes samples older than the retention window at flush", async () => {
    const old = ZStageSample.parse({
      tenantId: tenant.tenantId,
      kind: "turn",
      backend: "local",
      path: "turn",
      stage: "model",
      durationMs: 5,
      workspaceId: "ws-retention-probe",
      at: new Date(Date.now() - 3 * 24 * HOUR),
    });
    await processBerth().stageSamples.record([old]);
    await flushStageSamples({ retentionDays: 14 }, stageBuffer(), processBerth().db);
    expect(await rowsOf("ws-retention-probe")).toHaveLength(1);
    await flushStageSamples({ retentionDays: 2 }, stageBuffer(), processBerth().db);
    expect(await rowsOf("ws-retention-probe")).toHaveLength(0);
  });
});
