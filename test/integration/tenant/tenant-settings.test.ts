import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createCaller } from "@/server/api/root";
import type { ApiRuntime } from "@/server/api/context";
import { getDb } from "@/server/db";
import { getWorkspace, listWorkspaceEvents } from "@/server/modules/workspace/workspace.data";
import { createEnqueue } from "@/server/queue/enqueue";
import { contextFromHeaders, createTestApiRuntime } from "../api/support/api-test-runtime";
import { rejectionCode } from "../api/support/call-by-path";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { jobOutcome } from "../queue/queue-fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { installTestBerth } from "@/test/setup/test-berth";

/**
 * The tenant's defaults on its policy (`tenant.policy` / `tenant.setPolicy`): the isolation policy of agents
 * that name none, applied when a session picks its workspace, and the idle TTL of its workspaces, bounded by
 * the installation's and applied by the `workspace.sweep` job (real Postgres, Redis queues and workers).
 */
const INSTALLATION_TTL_MS = 3_600_000;

let h: WorkspaceHarness;
let runtime: ApiRuntime;
let tenant: TenantFixture;
let other: TenantFixture;
let owner: ReturnType<typeof createCaller>;
let ref: { tenantId: string };

beforeAll(async () => {
  h = await startWorkspaceHarness({ idleTtlMs: INSTALLATION_TTL_MS });
  await installTestBerth({ engine: h.engine });
  runtime = createTestApiRuntime();
  [tenant, other] = await Promise.all([
    createTenantFixture(runtime, "set"),
    createTenantFixture(runtime, "oth"),
  ]);
  owner = createCaller(contextFromHeaders(runtime, { cookie: tenant.owner.cookie }));
  ref = { tenantId: tenant.tenant.id };
});

afterAll(async () => {
  await closeProcessBerth();
  await h.close();
  await closeProcessBerth();
});

describe("tenant defaults", () => {
  it("shows the stored policy with what the operator allows, and bounds the idle TTL by the installation's", async () => {
    expect(await owner.tenant.policy(ref)).toEqual({
      stdioMcpMinRole: "admin",
      defaultIsolationPolicy: null,
      workspaceIdleTtlMs: null,
      checkpointKeepTurns: null,
      checkpointKeepDays: null,
      checkpointStorageBytes: null,
      operator: { idleTtlMs: INSTALLATION_TTL_MS, minIdleTtlMs: 60_000 },
      effective: { isolationPolicy: "PER_AGENT", idleTtlMs: INSTALLATION_TTL_MS },
    });
    const set = await owner.tenant.setPolicy({ ...ref, workspaceIdleTtlMs: 600_000 });
    expect(set).toMatchObject({ workspaceIdleTtlMs: 600_000, stdioMcpMinRole: "admin" });
    expect(set.effective.idleTtlMs).toBe(600_000);

    expect(
      await rejectionCode(owner.tenant.setPolicy({ ...ref, workspaceIdleTtlMs: INSTALLATION_TTL_MS + 1 })),
    ).toBe("BAD_REQUEST");
    expect(await rejectionCode(owner.tenant.setPolicy({ ...ref, workspaceIdleTtlMs: 59_999 }))).toBe(
      "BAD_REQUEST",
    );
    // Admins read the policy; only owners change it.
    const adminKey = createCaller(
      contextFromHeaders(runtime, { authorization: `Bearer ${tenant.adminKey.plainKey}` }),
    );
    expect((await adminKey.tenant.policy({})).workspaceIdleTtlMs).toBe(600_000);
    expect(await rejectionCode(adminKey.tenant.setPolicy({ workspaceIdleTtlMs: 120_000 }))).toBe("FORBIDDEN");
    // The refused changes changed nothing; null puts the installation's TTL back.
    expect((await owner.tenant.policy(ref)).workspaceIdleTtlMs).toBe(600_000);
    const reset = await owner.tenant.setPolicy({ ...ref, workspaceIdleTtlMs: null });
    expect(reset).toMatchObject({ workspaceIdleTtlMs: null, effective: { idleTtlMs: INSTALLATION_TTL_MS } });
  });

  it("gives sessions of agents without a policy the tenant's default isolation, and an agent's own policy wins", async () => {
    const follows = await owner.agent.create({ ...ref, name: "Follows", modelConfig: { model: "m" } });
    const pinned = await owner.agent.create({
      ...ref,
      name: "Pinned",
      modelConfig: { model: "m" },
      isolationPolicy: "PER_AGENT",
    });
    expect(follows.isolationPolicy).toBeNull();
    const sessionsOf = async (agentId: string) => [
      await owner.session.create({ ...ref, agentId }),
      await owner.session.create({ ...ref, agentId }),
    ];

    // Installation default: one workspace per agent.
    const [a1, a2] = await sessionsOf(follows.id);
    expect(a1!.workspaceId).toBe(a2!.workspaceId);

    await owner.tenant.setPolicy({ ...ref, defaultIsolationPolicy: "PER_SESSION" });
    const [b1, b2] = await sessionsOf(follows.id);
    expect(b1!.workspaceId).not.toBe(b2!.workspaceId);
    expect((await getWorkspace(tenant.ownerScope, b1!.workspaceId, getDb())).isolationPolicy).toBe(
      "PER_SESSION",
    );
    const [c1, c2] = await sessionsOf(pinned.id);
    expect(c1!.workspaceId).toBe(c2!.workspaceId);
    // Sessions made earlier keep the workspace they were given.
    expect((await owner.session.get({ ...ref, sessionId: a1!.sessionId })).workspaceId).toBe(a1!.workspaceId);
    // Another tenant's default is its own.
    expect((await owner.tenant.policy(ref)).effective.isolationPolicy).toBe("PER_SESSION");
    const otherOwner = createCaller(contextFromHeaders(runtime, { cookie: other.owner.cookie }));
    expect((await otherOwner.tenant.policy({ tenantId: other.tenant.id })).defaultIsolationPolicy).toBeNull();

    await owner.tenant.setPolicy({ ...ref, defaultIsolationPolicy: null });
    const [d1, d2] = await sessionsOf(follows.id);
    expect(d1!.workspaceId).toBe(d2!.workspaceId);
  });

  it("the sweep stops a workspace idle past its tenant's shorter TTL, and no other tenant's", async () => {
    await owner.tenant.setPolicy({ ...ref, workspaceIdleTtlMs: 60_000 });
    const mine = await freshSession(tenant.ownerScope);
    const theirs = await freshSession(other.ownerScope);
    await h.service.resolveForSession(tenant.ownerScope, mine.session.id);
    await h.service.resolveForSession(other.ownerScope, theirs.session.id);
    // Both idle for two minutes: past the tenant's minute, well within the installation's hour.
    const twoMinutesAgo = new Date(Date.now() - 120_000);
    await getDb().workspace.updateMany({
      where: { id: { in: [mine.workspaceId, theirs.workspaceId] } },
      data: { lastActivityAt: twoMinutesAgo },
    });

    const job = await createEnqueue(h.queues)("workspace.sweep", { trigger: "manual" });
    const report = (await jobOutcome(h.queues.get("workspace"), job)) as {
      stopping: string[];
    };
    expect(report.stopping).toContain(mine.workspaceId);
    expect(report.stopping).not.toContain(theirs.workspaceId);
    await vi.waitFor(
      async () =>
        expect((await getWorkspace(tenant.ownerScope, mine.workspaceId, getDb())).state).toBe("STOPPED"),
      { timeout: 15_000 },
    );
    expect((await getWorkspace(other.ownerScope, theirs.workspaceId, getDb())).state).toBe("READY");
    const [stopping] = await listWorkspaceEvents(
      tenant.ownerScope,
      mine.workspaceId,
      {
        kinds: ["stopping"],
      },
      getDb(),
    );
    expect(stopping?.reason).toBe("idle for more than 60 s (tenant setting)");
  });
});
