import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { POST as uploadFile } from "@/app/api/workspaces/[id]/files/route";
import type { ApiRuntime } from "@/server/api/context";
import { getDb } from "@/server/db";
import { cliOperatorActor } from "@/server/modules/operator/operator-actor";
import { resumeTenant, suspendTenant } from "@/server/modules/operator/tenant-lifecycle.service";
import { getWorkspace } from "@/server/modules/workspace/workspace.data";
import { createEnqueue } from "@/server/queue/enqueue";
import { deterministicJobId } from "@/server/queue/types";
import { createTestApiRuntime } from "../api/support/api-test-runtime";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "../workspace/harness";
import { callerWith, refusal } from "./support";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { installTestBerth } from "@/test/setup/test-berth";
import { processBerth } from "@/server/composition/process-berth";

/**
 * Suspending a tenant (issue 15): its workspaces stop through the ordinary `workspace.stop` jobs, and from
 * the status change on its cookie sessions, API keys (tRPC and route handlers) and queued jobs are refused
 * with FORBIDDEN `tenant_suspended`; nothing is deleted, and resuming brings every one of them back.
 * Real Postgres, Redis, in-process workers and bubblewrap workspaces.
 */
describe("a suspended tenant is refused everywhere and comes back on resume", () => {
  let h: WorkspaceHarness;
  let runtime: ApiRuntime;
  let t: TenantFixture;
  let other: TenantFixture;
  const operator = cliOperatorActor();

  beforeAll(async () => {
    h = await startWorkspaceHarness();
    // The upload route resolves the workspace through the process' engine: the harness's, not a default one
    // over .data/workspaces (which held no folder for the workspace, so its attach found it vanished).
    await installTestBerth({ engine: h.engine, queues: h.queues });
    runtime = createTestApiRuntime();
    t = await createTenantFixture(runtime, "susp");
    other = await createTenantFixture(runtime, "other");
  });
  afterAll(async () => {
    await closeProcessBerth();
    await h?.close();
  });

  const cookie = () => callerWith(runtime, { cookie: t.owner.cookie });
  const bearer = () => callerWith(runtime, { authorization: `Bearer ${t.adminKey.plainKey}` });
  const upload = (workspaceId: string) =>
    uploadFile(
      new Request(`http://localhost:3000/api/workspaces/${workspaceId}/files?path=probe.txt`, {
        method: "POST",
        headers: { authorization: `Bearer ${t.adminKey.plainKey}` },
        body: "probe",
      }),
      { params: Promise.resolve({ id: workspaceId }) },
    );

  it("stops its workspaces, refuses cookie, key, route and job with a typed error, and resumes", async () => {
    const { session, workspaceId } = await freshSession(t.ownerScope);
    await h.service.resolveForSession(t.ownerScope, session.id);
    expect((await getWorkspace(t.ownerScope, workspaceId, processBerth().db)).state).toBe("READY");
    const rowsBefore = await getDb().session.count({ where: { tenantId: t.tenant.id } });

    const suspended = await suspendTenant(
      operator,
      { tenantId: t.tenant.id, reason: "unpaid invoice" },
      processBerth().queues,
      processBerth().db,
    );
    expect(suspended.tenant.status).toBe("suspended");
    expect(suspended.stopsRequested).toEqual([workspaceId]);
    await vi.waitFor(
      async () =>
        expect((await getWorkspace(t.ownerScope, workspaceId, processBerth().db)).state).toBe("STOPPED"),
      { timeout: 20_000 },
    );

    const refused = { code: "FORBIDDEN", reason: "tenant_suspended" };
    // The dashboard learns why (tenant.me is not tenant-scoped); every tenant call is refused.
    const mine = (await cookie().tenant.me()).tenants.find((row) => row.id === t.tenant.id);
    expect(mine?.status).toBe("suspended");
    expect(await refusal(cookie().tenant.overview({ tenantId: t.tenant.id }))).toEqual(refused);
    expect(await refusal(cookie().session.list({ tenantSlug: t.tenant.slug }))).toEqual(refused);
    expect(await refusal(bearer().tenant.overview({}))).toEqual(refused);
    expect(await refusal(bearer().workspace.get({ workspaceId }))).toEqual(refused);
    const route = await upload(workspaceId);
    expect(route.status).toBe(403);
    expect(await route.json()).toMatchObject({
      error: { code: "FORBIDDEN", details: { reason: "tenant_suspended" } },
    });

    // A job queued for the tenant (as one enqueued before the suspension would be) fails once, typed.
    const enqueue = createEnqueue(h.queues);
    const job = await enqueue("workspace.provision", {
      tenantId: t.tenant.id,
      workspaceId,
      reason: "queued",
    });
    await vi.waitFor(async () => expect(await job.getState()).toBe("failed"), { timeout: 20_000 });
    const failed = await h.queues
      .get("workspace")
      .getJob(deterministicJobId("workspace.provision", workspaceId));
    expect(failed?.failedReason).toMatch(/^FORBIDDEN: tenant .* is suspended/);
    expect(failed?.attemptsMade).toBe(1);
    expect((await getWorkspace(t.ownerScope, workspaceId, processBerth().db)).state).toBe("STOPPED");

    // Another tenant is untouched.
    const otherCaller = callerWith(runtime, { cookie: other.owner.cookie });
    expect((await otherCaller.tenant.overview({ tenantId: other.tenant.id })).tenant.id).toBe(
      other.tenant.id,
    );
    // Nothing was deleted.
    expect(await getDb().session.count({ where: { tenantId: t.tenant.id } })).toBe(rowsBefore);

    const resumed = await resumeTenant(operator, { tenantId: t.tenant.id }, processBerth().db);
    expect(resumed.tenant.status).toBe("active");
    expect((await cookie().tenant.me()).tenants.find((row) => row.id === t.tenant.id)?.status).toBe("active");
    expect((await cookie().tenant.overview({ tenantId: t.tenant.id })).tenant.id).toBe(t.tenant.id);
    expect((await bearer().workspace.get({ workspaceId })).id).toBe(workspaceId);
    expect((await upload(workspaceId)).status).toBe(201);
    const again = await h.service.resolveForSession(t.ownerScope, session.id);
    expect(again.workspace.kind).toBe("local");
    expect((await getWorkspace(t.ownerScope, workspaceId, processBerth().db)).state).toBe("READY");

    const audit = await getDb().operatorAuditLog.findMany({
      where: { targetId: t.tenant.id },
      orderBy: { at: "asc" },
    });
    expect(audit.map((row) => [row.action, row.actorType, row.actorId, row.outcome])).toEqual([
      ["tenant.suspend", "system", "cli", "success"],
      ["tenant.resume", "system", "cli", "success"],
    ]);
    expect(audit[0]?.details).toEqual({ reason: "unpaid invoice" });
  });

  it("refuses to suspend twice or resume an active tenant (typed CONFLICT)", async () => {
    await expect(
      resumeTenant(operator, { tenantId: other.tenant.id }, processBerth().db),
    ).rejects.toMatchObject({
      code: "CONFLICT",
      details: { reason: "tenant_status", status: "active" },
    });
    await suspendTenant(operator, { tenantId: other.tenant.id }, processBerth().queues, processBerth().db);
    await expect(
      suspendTenant(operator, { tenantId: other.tenant.id }, processBerth().queues, processBerth().db),
    ).rejects.toMatchObject({
      code: "CONFLICT",
    });
    await resumeTenant(operator, { tenantId: other.tenant.id }, processBerth().db);
  });

  it("stops a workspace whose provision was under way when the tenant was suspended", async () => {
    const { session, workspaceId } = await freshSession(other.ownerScope);
    const create = h.machine.create.bind(h.machine);
    // The suspension lands while the machine is being made: its stop job finds PROVISIONING, nothing to stop.
    h.machine.create = async (spec, options) => {
      h.machine.create = create;
      const suspended = await suspendTenant(
        operator,
        { tenantId: other.tenant.id },
        processBerth().queues,
        processBerth().db,
      );
      expect(suspended.stopsRequested).toEqual([workspaceId]);
      return create(spec, options);
    };
    const refusedAttach = await h.service
      .resolveForSession(other.ownerScope, session.id)
      .catch((e: unknown) => e);
    // The caller was admitted before the suspension; its wait for the provision ends in the refusal.
    expect(String(refusedAttach)).toMatch(/FORBIDDEN: tenant .* is suspended/);
    await vi.waitFor(
      async () =>
        expect((await getWorkspace(other.ownerScope, workspaceId, processBerth().db)).state).toBe("STOPPED"),
      { timeout: 20_000 },
    );
    expect(h.machine.stopped).toContain(workspaceId);
    await resumeTenant(operator, { tenantId: other.tenant.id }, processBerth().db);
  });
});
