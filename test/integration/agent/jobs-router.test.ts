import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { flushAuditBuffer } from "@/server/modules/audit/audit-buffer.service";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { createEnqueue } from "@/server/queue/enqueue";
import { getQueues } from "@/server/queue/queues";
import { getRedis } from "@/server/redis";
import { freshSession } from "../workspace/harness";
import { rejectionCode } from "../api/support/call-by-path";
import { createTenantFixture } from "../api/support/tenant-fixtures";
import { startAgentApiHarness, type AgentApiHarness } from "./support";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

/** jobs.list | retry: admins see and retry their tenant's jobs only (tenancy is the payload's tenantId). */
let h: AgentApiHarness;

beforeAll(async () => {
  h = await startAgentApiHarness("jobs");
});

afterAll(async () => {
  await h.close();
  await closeProcessBerth();
});

describe("jobs router", () => {
  it("lists the tenant's failed job, retries it, and hides other tenants' jobs", async () => {
    const enqueue = createEnqueue(h.workspace.queues);
    const other = await createTenantFixture(h.runtime, "jobs-other");
    // A provision for a workspace that has no record fails at once (attempts: 1): a failed job to retry.
    const mine = await enqueue(
      "workspace.provision",
      { tenantId: h.tenant.tenant.id, workspaceId: `missing-${randomUUID()}` },
      { attempts: 1 },
    );
    const theirs = await enqueue(
      "workspace.provision",
      { tenantId: other.tenant.id, workspaceId: `missing-${randomUUID()}` },
      { attempts: 1 },
    );
    await vi.waitFor(
      async () => {
        const failed = await h.owner.jobs.list({ ...h.ref, states: ["failed"] });
        expect(failed.map((job) => job.id)).toContain(mine.id);
      },
      { timeout: 60_000, interval: 100 },
    );
    const listed = await h.owner.jobs.list({ ...h.ref, limit: 200 });
    expect(listed.map((job) => job.id)).not.toContain(theirs.id);
    expect(listed.every((job) => (job.data as { tenantId: string }).tenantId === h.tenant.tenant.id)).toBe(
      true,
    );

    const firstFailure = listed.find((job) => job.id === mine.id)!.finishedAt!.getTime();
    const retried = await h.owner.jobs.retry({ ...h.ref, jobId: mine.id! });
    expect(retried).toMatchObject({ id: mine.id, state: "waiting" });
    await vi.waitFor(
      async () => {
        const [job] = (await h.owner.jobs.list({ ...h.ref, states: ["failed"] })).filter(
          (j) => j.id === mine.id,
        );
        // Ran again and failed again (the workspace still has no record).
        expect(job?.finishedAt?.getTime()).toBeGreaterThan(firstFailure);
      },
      { timeout: 60_000, interval: 100 },
    );

    expect(await rejectionCode(h.owner.jobs.retry({ ...h.ref, jobId: theirs.id! }))).toBe("NOT_FOUND");
    expect(await rejectionCode(h.viewer.jobs.list(h.ref))).toBe("FORBIDDEN");
    expect(await rejectionCode(h.viewer.jobs.retry({ ...h.ref, jobId: mine.id! }))).toBe("FORBIDDEN");

    // The retry is in the audit log, with who did it and to which job.
    await flushAuditBuffer({
      db: processBerth().db,
      redis: getRedis(),
      redisPrefix: getQueues().redisPrefix,
    });
    const audit = await h.owner.audit.list({ ...h.ref, action: "jobs.retry" });
    expect(audit.items.map((entry) => `${entry.targetId}:${entry.outcome}`)).toEqual(
      expect.arrayContaining([`${mine.id}:success`, `${theirs.id}:failure`]),
    );
  });

  it("keeps finished provisions and stops listed, and still runs the next provision and stop of the workspace", async () => {
    const { session, workspaceId } = await freshSession(h.tenant.ownerScope);
    const services = h.workspace.service;
    const stopAndWait = async () => {
      await services.requestStop(h.tenant.ownerScope, workspaceId, { force: true, reason: "test stop" });
      await vi.waitFor(
        async () =>
          expect((await getWorkspace(h.tenant.ownerScope, workspaceId, processBerth().db)).state).toBe(
            "STOPPED",
          ),
        { timeout: 60_000, interval: 100 },
      );
    };
    const jobsOf = async () =>
      (await h.owner.jobs.list({ ...h.ref, limit: 200 })).filter(
        (job) => (job.data as { workspaceId?: string }).workspaceId === workspaceId,
      );

    await services.resolveForSession(h.tenant.ownerScope, session.id);
    await stopAndWait();
    expect((await jobsOf()).map((job) => `${job.name}:${job.state}`).sort()).toEqual([
      "workspace.provision:completed",
      "workspace.stop:completed",
    ]);
    const firstRun = (await jobsOf()).map((job) => job.finishedAt!.getTime());

    // Same job ids again: the finished jobs are replaced by new runs, not returned as if they had just run.
    await services.resolveForSession(h.tenant.ownerScope, session.id);
    expect((await getWorkspace(h.tenant.ownerScope, workspaceId, processBerth().db)).state).toBe("READY");
    await stopAndWait();
    const secondRun = await jobsOf();
    expect(secondRun.map((job) => `${job.name}:${job.state}`).sort()).toEqual([
      "workspace.provision:completed",
      "workspace.stop:completed",
    ]);
    for (const job of secondRun) expect(job.finishedAt!.getTime()).toBeGreaterThan(Math.max(...firstRun));
  });
});
