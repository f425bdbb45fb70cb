import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { insertStageSamples } from "@/server/modules/metrics/metrics.data";
import { ZStageSample } from "@/server/modules/metrics/stage-sample.schema";
import { flushStageSamples } from "@/server/modules/metrics/stage-buffer.service";
import { workspaceTimeline, workspaceTimings } from "@/server/modules/metrics/workspace-timings.service";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { addTestMember, createTestTenant, expectAppError, type TestTenant } from "../db/fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { processBerth } from "@/server/composition/process-berth";

/** The process root's stage buffer (what the workers' `metrics.flush` drains). */
const stageBuffer = () => ({ redis: processBerth().redis, redisPrefix: processBerth().queues.redisPrefix });

describe("a workspace's stage timings and lifecycle timeline (real Postgres, Redis, workers)", () => {
  let h: WorkspaceHarness;
  let tenant: TestTenant;
  let workspaceId: string;

  beforeAll(async () => {
    h = await startWorkspaceHarness();
    tenant = await createTestTenant();
    // A real cold provision, a stop, and the resume: events in the ledger, samples through the buffer.
    const fresh = await freshSession(tenant.scope);
    workspaceId = fresh.workspaceId;
    await h.service.resolveForSession(tenant.scope, fresh.session.id);
    await h.service.requestStop(tenant.scope, workspaceId, { reason: "timeline stop" });
    await vi.waitFor(
      async () =>
        expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("STOPPED"),
      { timeout: 15_000 },
    );
    await h.service.resolveForSession(tenant.scope, fresh.session.id);
    await vi.waitFor(
      async () => {
        await flushStageSamples({ retentionDays: 14 }, stageBuffer(), processBerth().db);
        const { provisions } = await workspaceTimings(tenant.scope, workspaceId, processBerth().db);
        expect(provisions.map((p) => p.path)).toEqual(["cold", "resume"]);
      },
      { timeout: 15_000, interval: 200 },
    );
  });
  afterAll(async () => {
    await h.close();
  });

  it("sums each stage of this workspace only, and lists its provisions oldest first with their stages", async () => {
    // Another workspace's sample of the same tenant does not count.
    await insertStageSamples(
      [
        ZStageSample.parse({
          tenantId: tenant.tenantId,
          kind: "provision",
          backend: "local",
          path: "cold",
          stage: "total",
          durationMs: 99_999,
          workspaceId: "another-workspace",
          at: new Date(),
        }),
      ],
      processBerth().db,
    );
    const view = await workspaceTimings(tenant.scope, workspaceId, processBerth().db);
    const total = view.stages.filter((s) => s.kind === "provision" && s.stage === "total");
    expect(total.map((s) => [s.path, s.count])).toEqual([
      ["cold", 1],
      ["resume", 1],
    ]);
    expect(total.every((s) => s.maxMs < 99_999)).toBe(true);
    expect(view.stages.map((s) => `${s.kind}/${s.path}/${s.stage}`)).toEqual(
      expect.arrayContaining(["attach/cold/attach", "attach/resume/attach", "provision/cold/queued"]),
    );
    const [cold, resume] = view.provisions;
    expect(cold!.at.getTime()).toBeLessThan(resume!.at.getTime());
    expect(cold).toMatchObject({ path: "cold", ok: true });
    expect(cold!.queuedMs! + cold!.machineMs!).toBeLessThanOrEqual(cold!.totalMs!);
  });

  it("puts events, provisions and attaches on one timeline in time order, paged back without gaps or repeats", async () => {
    const whole = await workspaceTimeline(tenant.scope, workspaceId, { limit: 200 }, processBerth().db);
    expect(whole.earlier).toBeNull();
    const times = whole.items.map((item) => item.at.getTime());
    expect(times).toEqual(times.toSorted((a, b) => a - b));
    const labels = whole.items.map((item) =>
      item.source === "event" ? item.kind : `${item.kind}:${item.stage}:${item.path}`,
    );
    // The lifecycle as it happened: created → provisioned (and measured) → stopped → resumed.
    const order = ["created", "provisioned", "provision:total:cold", "stopped", "provision:total:resume"];
    const positions = order.map((label) => labels.indexOf(label));
    expect(positions.every((position) => position >= 0)).toBe(true);
    expect(positions).toEqual(positions.toSorted((a, b) => a - b));
    expect(labels).toContain("attach:attach:resume");
    const stopped = whole.items.find((item) => item.source === "event" && item.kind === "stopping");
    // The actor as people read it (the owner's email), with the stored id kept.
    expect(stopped).toMatchObject({
      reason: "timeline stop",
      actor: `user:${tenant.owner.id}`,
      actorName: tenant.owner.email,
    });
    // A turn's stages stay off the timeline.
    expect(labels.some((label) => label.startsWith("turn:"))).toBe(false);

    // Pages of 3 going back, put together, are the whole timeline.
    const pages: string[][] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await workspaceTimeline(
        tenant.scope,
        workspaceId,
        { limit: 3, cursor },
        processBerth().db,
      );
      pages.unshift(page.items.map((item) => item.key));
      if (!page.earlier) break;
      cursor = page.earlier;
    }
    expect(pages.flat()).toEqual(whole.items.map((item) => item.key));
    expect(pages.length).toBeGreaterThan(1);
  });

  it("answers NOT_FOUND for another tenant's workspace and for a member who has no session on it", async () => {
    const other = await createTestTenant();
    await expectAppError(workspaceTimings(other.scope, workspaceId, processBerth().db), "NOT_FOUND");
    await expectAppError(
      workspaceTimeline(other.scope, workspaceId, { limit: 10 }, processBerth().db),
      "NOT_FOUND",
    );
    const member = await addTestMember(tenant, "member");
    await expectAppError(
      workspaceTimeline(member.scope, workspaceId, { limit: 10 }, processBerth().db),
      "NOT_FOUND",
    );
    const viewer = await addTestMember(tenant, "viewer");
    expect((await workspaceTimings(viewer.scope, workspaceId, processBerth().db)).provisions).toHaveLength(2);
    await expectAppError(
      workspaceTimeline(tenant.scope, workspaceId, { limit: 10, cursor: "not-a-cursor" }, processBerth().db),
      "BAD_REQUEST",
    );
  });
});
