import { randomUUID } from "node:crypto";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { TRPCError } from "@trpc/server";
import { processBerth } from "@/server/composition/process-berth";
import { getDb } from "@/server/db";
import type { AppError } from "@/server/shared/errors";
import { createSession } from "@/server/modules/session/session.data";
import { upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { assignWorkspaceId, IsolationPolicy } from "@/server/workspace/manager/isolation";
import { createCaller } from "@/server/api/root";
import { rejectionCode } from "../api/support/call-by-path";
import { contextFromHeaders } from "../api/support/api-test-runtime";
import { startAgentApiHarness, type AgentApiHarness } from "../agent/support";
import { closeProcessBerth } from "@/server/composition/process-berth";

/** session.create's workspace rules and session.delete's purge (through the real job and workers). */
let h: AgentApiHarness;

beforeAll(async () => {
  h = await startAgentApiHarness("sess");
});

afterAll(async () => {
  await h.close();
  await closeProcessBerth();
});

const newAgent = async (isolationPolicy?: "PER_AGENT" | "PER_SESSION" | "PER_USER") =>
  h.owner.agent.create({
    ...h.ref,
    name: `agent-${randomUUID().slice(0, 8)}`,
    modelConfig: { baseUrl: "http://127.0.0.1:9/v1", model: "m" },
    ...(isolationPolicy ? { isolationPolicy } : {}),
  });

const bindFresh = async () => h.owner.session.create({ ...h.ref, agentId: (await newAgent()).id });

describe("session.create", () => {
  it("binds sessions of an agent without a policy to the PER_AGENT id (tenant default), provisioning nothing", async () => {
    const agent = await newAgent();
    const first = await h.owner.session.create({ ...h.ref, agentId: agent.id, name: "one" });
    const second = await h.owner.session.create({ ...h.ref, agentId: agent.id });
    const expected = assignWorkspaceId(IsolationPolicy.PER_AGENT, {
      tenantId: h.tenant.tenant.id,
      userId: h.tenant.owner.id,
      agentId: agent.id,
    });
    expect(first.workspaceId).toBe(expected);
    expect(second.workspaceId).toBe(expected);
    expect(first.sessionId).not.toBe(second.sessionId);
    const stored = await h.owner.session.get({ ...h.ref, sessionId: first.sessionId });
    expect(stored).toMatchObject({ workspaceId: expected, name: "one", agentId: agent.id });
    expect((await h.owner.workspace.get({ ...h.ref, workspaceId: expected })).state).toBe("PENDING");
    expect(h.workspace.machine.provisioned).not.toContain(expected);
  });

  it("follows the agent's own policy: PER_SESSION mints a fresh id per session, PER_USER one per user", async () => {
    const perSession = await newAgent("PER_SESSION");
    const a = await h.owner.session.create({ ...h.ref, agentId: perSession.id });
    const b = await h.owner.session.create({ ...h.ref, agentId: perSession.id });
    expect(a.workspaceId).toMatch(/^[0-9a-f]{32}$/);
    expect(a.workspaceId).not.toBe(b.workspaceId);

    const perUser = [await newAgent("PER_USER"), await newAgent("PER_USER")];
    const ids = await Promise.all(
      perUser.map(
        async (agent) => (await h.owner.session.create({ ...h.ref, agentId: agent.id })).workspaceId,
      ),
    );
    expect(ids[0]).toBe(
      assignWorkspaceId(IsolationPolicy.PER_USER, {
        tenantId: h.tenant.tenant.id,
        userId: h.tenant.owner.id,
        agentId: "",
      }),
    );
    expect(ids[1]).toBe(ids[0]);
  });

  it("honours an explicit workspace id of the caller's own, and refuses any other with a typed reason (never a substitute)", async () => {
    const [leader, helper] = [await newAgent(), await newAgent()];
    const own = await h.owner.session.create({ ...h.ref, agentId: leader.id });
    const shared = await h.owner.session.create({
      ...h.ref,
      agentId: helper.id,
      workspaceId: own.workspaceId,
    });
    expect(shared.workspaceId).toBe(own.workspaceId);

    const refusal = async (workspaceId: string) => {
      const error = await h.owner.session
        .create({ ...h.ref, agentId: helper.id, workspaceId })
        .then(() => expect.fail(`session.create with ${workspaceId} should be refused`))
        .catch((thrown: unknown) => thrown as TRPCError);
      expect(error).toBeInstanceOf(TRPCError);
      const cause = error.cause as AppError;
      return { code: error.code, message: error.message, reason: cause.details?.reason };
    };
    expect(await refusal("no-such-ws")).toEqual({
      code: "NOT_FOUND",
      message: expect.stringContaining("does not exist") as unknown,
      reason: "not_found",
    });

    const othersId = `other-${randomUUID().slice(0, 8)}`;
    await upsertWorkspaceBinding(
      h.tenant.ownerScope,
      {
        id: othersId,
        backendKind: "local",
        isolationPolicy: "PER_AGENT",
        userId: h.tenant.viewer.id,
      },
      { config: processBerth().config.quotas },
      getDb(),
    );
    expect(await refusal(othersId)).toMatchObject({ code: "FORBIDDEN", reason: "other_user" });

    const perSession = await newAgent("PER_SESSION");
    const privateOne = await h.owner.session.create({ ...h.ref, agentId: perSession.id });
    expect(await refusal(privateOne.workspaceId)).toMatchObject({ code: "CONFLICT", reason: "per_session" });

    const purgedId = `purged-${randomUUID().slice(0, 8)}`;
    await upsertWorkspaceBinding(
      h.tenant.ownerScope,
      {
        id: purgedId,
        backendKind: "local",
        isolationPolicy: "PER_AGENT",
        userId: h.tenant.owner.id,
      },
      { config: processBerth().config.quotas },
      getDb(),
    );
    await getDb().workspace.update({ where: { id: purgedId }, data: { state: "PURGED" } });

    // Nothing was created for the refused requests.
    const { items } = await h.owner.session.list({ ...h.ref, agentId: helper.id });
    expect(items.map((session) => session.workspaceId)).toEqual([own.workspaceId]);

    // A purged workspace is not gone: a purge ends a generation, and the next use starts the next one.
    const onPurged = await h.owner.session.create({ ...h.ref, agentId: helper.id, workspaceId: purgedId });
    expect(onPurged.workspaceId).toBe(purgedId);
  });

  it("binds on the backend the agent chooses, else the tenant's default, and refuses one the installation does not run", async () => {
    const installed = (
      await h.owner.workspace.get({ ...h.ref, workspaceId: (await bindFresh()).workspaceId })
    ).backendKind;
    const absent = installed === "docker" ? "e2b" : "docker";
    const db = getDb();
    const refusal = async (agentId: string) => {
      const error = await h.owner.session.create({ ...h.ref, agentId }).then(
        () => expect.fail("expected a refusal"),
        (caught: unknown) => caught as TRPCError,
      );
      expect(error.code).toBe("UNPROCESSABLE_CONTENT");
      // Nothing is left behind: no session without its binding.
      expect(await db.session.count({ where: { agentId } })).toBe(0);
      return error.message;
    };
    // Choices stored before the operator disabled their backend (the API refuses them today).
    const choosesAbsent = await newAgent();
    await db.agent.update({ where: { id: choosesAbsent.id }, data: { backend: absent } });
    expect(await refusal(choosesAbsent.id)).toContain("its agent");

    await db.tenant.update({ where: { id: h.tenant.tenant.id }, data: { defaultBackend: absent } });
    try {
      expect(await refusal((await newAgent()).id)).toContain("the tenant default");
      // The agent's own choice comes first.
      const choosesInstalled = await newAgent();
      await db.agent.update({ where: { id: choosesInstalled.id }, data: { backend: installed } });
      const bound = await h.owner.session.create({ ...h.ref, agentId: choosesInstalled.id });
      const record = await h.owner.workspace.get({ ...h.ref, workspaceId: bound.workspaceId });
      expect(record.backendKind).toBe(installed);
    } finally {
      await db.tenant.update({ where: { id: h.tenant.tenant.id }, data: { defaultBackend: null } });
    }
  });

  it("creates one session per idempotency key and caller, even for two requests at once (a double click)", async () => {
    const agent = await newAgent("PER_SESSION");
    const idempotencyKey = randomUUID();
    const keyed = { ...h.ref, agentId: agent.id, idempotencyKey };
    const [first, second] = await Promise.all([h.owner.session.create(keyed), h.owner.session.create(keyed)]);
    const again = await h.owner.session.create({ ...keyed, name: "retry after a lost answer" });
    expect(second).toEqual(first);
    expect(again).toEqual(first);
    const stored = await getDb().session.findMany({ where: { agentId: agent.id } });
    expect(stored.map((session) => session.id)).toEqual([first.sessionId]);

    // Another key, or the same key from another caller (an API key), is another create.
    const other = await h.owner.session.create({ ...keyed, idempotencyKey: randomUUID() });
    const apiKeyCaller = createCaller(
      contextFromHeaders(h.runtime, { authorization: `Bearer ${h.tenant.adminKey.plainKey}` }),
    );
    const fromKey = await apiKeyCaller.session.create(keyed);
    expect(new Set([first.sessionId, other.sessionId, fromKey.sessionId]).size).toBe(3);
    expect(await rejectionCode(h.owner.session.create({ ...keyed, idempotencyKey: "short" }))).toBe(
      "BAD_REQUEST",
    );
  });

  it("rejects viewers and unknown agents", async () => {
    const agent = await newAgent();
    expect(await rejectionCode(h.viewer.session.create({ ...h.ref, agentId: agent.id }))).toBe("FORBIDDEN");
    expect(await rejectionCode(h.owner.session.create({ ...h.ref, agentId: "nope" }))).toBe("NOT_FOUND");
  });
});

describe("session.delete", () => {
  it("deletes the session and its team workers, and purges their offload files from the workspace", async () => {
    const [leaderAgent, workerAgent] = [await newAgent(), await newAgent()];
    const scope = h.tenant.ownerScope;
    const { sessionId, workspaceId } = await h.owner.session.create({ ...h.ref, agentId: leaderAgent.id });
    const worker = await createSession(
      scope,
      {
        agentId: workerAgent.id,
        workspaceId,
        leaderSessionId: sessionId,
      },
      getDb(),
    );
    const bystander = await h.owner.session.create({ ...h.ref, agentId: leaderAgent.id });
    const { workspace } = await h.workspace.service.resolveForSession(scope, sessionId);
    for (const id of [sessionId, worker.id, bystander.sessionId]) {
      await workspace.offloadToolResult(id, "call_1", `output of ${id}`);
    }
    // Through the backend: the workdir is the sandbox's path, not necessarily a host path.
    const dirOf = (id: string) => path.posix.join(workspace.workdir, "sessions", id);
    const exists = async (dir: string) => (await workspace.machine.stat(dir)) !== null;
    expect(await exists(dirOf(worker.id))).toBe(true);

    const deleted = await h.owner.session.delete({ ...h.ref, sessionId });
    expect(deleted.sessionIds).toEqual([sessionId, worker.id]);
    expect(await rejectionCode(h.owner.session.get({ ...h.ref, sessionId }))).toBe("NOT_FOUND");
    expect(await rejectionCode(h.owner.session.get({ ...h.ref, sessionId: worker.id }))).toBe("NOT_FOUND");

    // The purge job removes a session's files, then writes its receipt, one session after the other: the
    // last receipt may land just after the last folder is gone.
    await vi.waitFor(
      async () => {
        expect(await exists(dirOf(sessionId))).toBe(false);
        expect(await exists(dirOf(worker.id))).toBe(false);
        const receipts = await h.owner.workspace.purgeReceipts({ ...h.ref, targetType: "session" });
        expect(receipts.map((receipt) => receipt.targetId)).toEqual(
          expect.arrayContaining([sessionId, worker.id]),
        );
      },
      { timeout: 60_000, interval: 100 },
    );
    expect(await exists(dirOf(bystander.sessionId))).toBe(true);
  });
});
