import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { disconnectDb } from "@/server/db";
import { createEnqueue } from "@/server/queue/enqueue";
import { rejectionCode } from "../api/support/call-by-path";
import { createTenantFixture } from "../api/support/tenant-fixtures";
import { startAgentApiHarness, type AgentApiHarness } from "./support";

/** jobs.list | retry: admins see and retry their tenant's jobs only (tenancy is the payload's tenantId). */
let h: AgentApiHarness;

beforeAll(async () => {
  h = await startAgentApiHarness("jobs");
});

afterAll(async () => {
  await h.close();
  await disconnectDb();
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
  });
});
