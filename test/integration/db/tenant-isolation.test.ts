import { beforeAll, describe, expect, it } from "vitest";
import { deriveSecretKey } from "@/server/auth/secrets";
import { getDb } from "@/server/db";
import {
  getApiKey,
  listApiKeys,
  revokeApiKey,
  setApiKeyOwnership,
} from "@/server/modules/api-key/api-key.data";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import {
  createAgent,
  deleteAgent,
  getAgent,
  getAgentByName,
  getAgentModelApiKey,
  getAgentOrNull,
  listAgents,
  updateAgent,
} from "@/server/modules/agent/agent.data";
import {
  appendAuditLog,
  listAuditLogs,
  listPurgeReceipts,
  recordPurgeReceipt,
} from "@/server/modules/audit/audit.data";
import { getMember, listMembers, removeMember, updateMemberRole } from "@/server/modules/member/member.data";
import {
  appendChatMessage,
  createSession,
  deleteChatMessages,
  deleteSession,
  getSession,
  getSessionOrNull,
  listChatMessages,
  listSessions,
  updateSession,
} from "@/server/modules/session/session.data";
import { getTenant, getTenantCounts, updateTenantName } from "@/server/modules/tenant/tenant.data";
import {
  appendWorkspaceEvent,
  getWorkspace,
  getWorkspaceOrNull,
  listWorkspaceEvents,
  listWorkspaceLeases,
  releaseWorkspaceLease,
  upsertWorkspaceBinding,
} from "@/server/modules/workspace/workspace.data";
import {
  acquireLeaseLocked,
  touchWorkspaceActivity,
  transitionFrom,
} from "@/server/modules/workspace/workspace-lifecycle.data";

const LEASE_OF = (holder: string) => ({ holder, reason: "test", expiresAt: new Date(Date.now() + 600_000) });
import { listWorkspaces } from "@/server/modules/workspace/workspace-list.data";
import { createTestTenant, expectAppError, testAuth, type TestTenant } from "./fixtures";
import { processBerth } from "@/server/composition/process-berth";

const secretKey = deriveSecretKey("tenant-isolation-test-secret");

/** B's rows, created through the data layer; A then tries to reach every one of them. */
type Seeded = { agentId: string; sessionId: string; workspaceId: string; apiKeyId: string };

async function seed(t: TestTenant): Promise<Seeded> {
  const agent = await createAgent(
    t.scope,
    {
      name: "shared-name",
      modelConfig: { provider: "openai-compatible", model: "m" },
      modelApiKey: `sk-${t.slug}`,
    },
    secretKey,
    processBerth().db,
  );
  const workspaceId = `ws-${t.slug}`;
  await upsertWorkspaceBinding(
    t.scope,
    {
      id: workspaceId,
      backendKind: "local",
      isolationPolicy: "PER_AGENT",
      agentId: agent.id,
    },
    { config: processBerth().config.quotas },
    processBerth().db,
  );
  const session = await createSession(
    t.scope,
    { agentId: agent.id, workspaceId, name: `s-${t.slug}` },
    processBerth().db,
  );
  await appendChatMessage(
    t.scope,
    session.id,
    { role: "user", content: [{ type: "text", text: "hi" }] },
    processBerth().db,
  );
  await acquireLeaseLocked(t.scope, workspaceId, LEASE_OF("turn:1"), processBerth().db);
  await appendAuditLog(
    t.scope,
    {
      action: "test.seed",
      outcome: "success",
      targetType: "tenant",
      targetId: t.tenantId,
    },
    processBerth().db,
  );
  await recordPurgeReceipt(
    t.scope,
    { targetType: "session", targetId: "gone", deleted: { messages: 1 } },
    processBerth().db,
  );
  const { apiKey } = await createApiKey(
    testAuth(),
    t.scope,
    { name: "ci", role: "member" },
    apiKeySecret(processBerth().config),
    processBerth().db,
  );
  return { agentId: agent.id, sessionId: session.id, workspaceId, apiKeyId: apiKey.id };
}

describe("tenant isolation at the data layer", () => {
  let a: TestTenant;
  let b: TestTenant;
  let bRows: Seeded;
  let aRows: Seeded;

  beforeAll(async () => {
    a = await createTestTenant();
    b = await createTestTenant();
    aRows = await seed(a);
    bRows = await seed(b);
  });

  it("tenant reads only see the scope's tenant", async () => {
    expect((await getTenant(a.scope, processBerth().db)).id).toBe(a.tenantId);
    expect(await getTenantCounts(a.scope, processBerth().db)).toEqual({
      agents: 1,
      sessions: 1,
      workspaces: 1,
      activeWorkspaces: 1,
      members: 1,
      apiKeys: 1,
    });
    await updateTenantName(a.scope, "renamed A", processBerth().db);
    expect((await getTenant(b.scope, processBerth().db)).name).toBe(`Tenant ${b.slug}`);
  });

  it("members: A cannot read, re-role or remove B's members", async () => {
    expect((await listMembers(a.scope, processBerth().db)).map((m) => m.userId)).toEqual([a.owner.id]);
    await expectAppError(getMember(a.scope, b.owner.id, processBerth().db), "NOT_FOUND");
    await expectAppError(updateMemberRole(a.scope, b.owner.id, "viewer", processBerth().db), "NOT_FOUND");
    await expectAppError(removeMember(a.scope, b.owner.id, processBerth().db), "NOT_FOUND");
    expect((await getMember(b.scope, b.owner.id, processBerth().db)).role).toBe("owner");
  });

  it("api keys: A cannot list, read, re-own or revoke B's keys", async () => {
    expect((await listApiKeys(a.scope, undefined, processBerth().db)).map((k) => k.id)).toEqual([
      aRows.apiKeyId,
    ]);
    await expectAppError(getApiKey(a.scope, bRows.apiKeyId, processBerth().db), "NOT_FOUND");
    await expectAppError(
      setApiKeyOwnership(
        a.scope,
        bRows.apiKeyId,
        { role: "admin", createdByUserId: a.owner.id },
        processBerth().db,
      ),
      "NOT_FOUND",
    );
    await expectAppError(revokeApiKey(a.scope, bRows.apiKeyId, processBerth().db), "NOT_FOUND");
    const bKey = await getApiKey(b.scope, bRows.apiKeyId, processBerth().db);
    expect(bKey).toMatchObject({ revokedAt: null, role: "member", createdByUserId: b.owner.id });
  });

  it("audit logs and purge receipts are listed per tenant", async () => {
    const aLogs = await listAuditLogs(a.scope, undefined, processBerth().db);
    expect(aLogs.items.length).toBeGreaterThan(0);
    expect(aLogs.items.every((l) => l.targetId !== b.tenantId)).toBe(true);
    expect(aLogs.items.some((l) => l.targetId === a.tenantId)).toBe(true);
    const receipts = await listPurgeReceipts(a.scope, undefined, processBerth().db);
    expect(receipts).toHaveLength(1);
    const rawReceipts = await getDb().purgeReceipt.findMany({
      where: { id: { in: receipts.map((r) => r.id) } },
      select: { tenantId: true },
    });
    expect(rawReceipts.every((r) => r.tenantId === a.tenantId)).toBe(true);
  });

  it("agents: same name allowed per tenant; A cannot reach B's agent", async () => {
    expect((await listAgents(a.scope, undefined, processBerth().db)).items.map((x) => x.id)).toEqual([
      aRows.agentId,
    ]);
    expect((await getAgentByName(a.scope, "shared-name", processBerth().db))?.id).toBe(aRows.agentId);
    expect(await getAgentOrNull(a.scope, bRows.agentId, processBerth().db)).toBeNull();
    await expectAppError(getAgent(a.scope, bRows.agentId, processBerth().db), "NOT_FOUND");
    await expectAppError(
      updateAgent(a.scope, bRows.agentId, { description: "pwned" }, secretKey, processBerth().db),
      "NOT_FOUND",
    );
    await expectAppError(
      getAgentModelApiKey(a.scope, bRows.agentId, secretKey, processBerth().db),
      "NOT_FOUND",
    );
    await expectAppError(deleteAgent(a.scope, bRows.agentId, processBerth().db), "NOT_FOUND");
    const bAgent = await getAgent(b.scope, bRows.agentId, processBerth().db);
    expect(bAgent.description).toBe("");
    expect(await getAgentModelApiKey(b.scope, bRows.agentId, secretKey, processBerth().db)).toBe(
      `sk-${b.slug}`,
    );
  });

  it("sessions and messages: A cannot create on B's agent or read/change B's sessions", async () => {
    await expectAppError(
      createSession(a.scope, { agentId: bRows.agentId, workspaceId: "ws-x" }, processBerth().db),
      "NOT_FOUND",
    );
    await expectAppError(
      createSession(
        a.scope,
        {
          agentId: aRows.agentId,
          workspaceId: aRows.workspaceId,
          leaderSessionId: bRows.sessionId,
        },
        processBerth().db,
      ),
      "NOT_FOUND",
    );
    expect(await getSessionOrNull(a.scope, bRows.sessionId, processBerth().db)).toBeNull();
    await expectAppError(getSession(a.scope, bRows.sessionId, processBerth().db), "NOT_FOUND");
    expect((await listSessions(a.scope, undefined, processBerth().db)).items.map((s) => s.id)).toEqual([
      aRows.sessionId,
    ]);
    expect(
      (await listSessions(a.scope, { workspaceId: bRows.workspaceId }, processBerth().db)).items,
    ).toEqual([]);
    await expectAppError(
      updateSession(a.scope, bRows.sessionId, { name: "pwned" }, processBerth().db),
      "NOT_FOUND",
    );
    await expectAppError(
      appendChatMessage(a.scope, bRows.sessionId, { role: "user", content: "x" }, processBerth().db),
      "NOT_FOUND",
    );
    expect(await listChatMessages(a.scope, bRows.sessionId, undefined, processBerth().db)).toEqual([]);
    expect(await deleteChatMessages(a.scope, bRows.sessionId, processBerth().db)).toBe(0);
    await expectAppError(deleteSession(a.scope, bRows.sessionId, processBerth().db), "NOT_FOUND");
    const bSession = await getSession(b.scope, bRows.sessionId, processBerth().db);
    expect(bSession.name).toBe(`s-${b.slug}`);
    expect(await listChatMessages(b.scope, bRows.sessionId, undefined, processBerth().db)).toHaveLength(1);
  });

  it("workspaces, leases and events: A cannot bind, read, move or lease B's workspace", async () => {
    await expectAppError(
      upsertWorkspaceBinding(
        a.scope,
        {
          id: bRows.workspaceId,
          backendKind: "docker",
          isolationPolicy: "PER_SESSION",
        },
        { config: processBerth().config.quotas },
        processBerth().db,
      ),
      "CONFLICT",
    );
    expect(await getWorkspaceOrNull(a.scope, bRows.workspaceId, processBerth().db)).toBeNull();
    await expectAppError(getWorkspace(a.scope, bRows.workspaceId, processBerth().db), "NOT_FOUND");
    expect((await listWorkspaces(a.scope, undefined, processBerth().db)).items.map((w) => w.id)).toEqual([
      aRows.workspaceId,
    ]);
    await expectAppError(
      transitionFrom(
        a.scope,
        bRows.workspaceId,
        { from: ["PENDING"], to: "PROVISIONING", reason: "evil" },
        processBerth().db,
      ),
      "NOT_FOUND",
    );
    await expectAppError(
      acquireLeaseLocked(a.scope, bRows.workspaceId, LEASE_OF("evil"), processBerth().db),
      "NOT_FOUND",
    );
    const before = await getWorkspace(b.scope, bRows.workspaceId, processBerth().db);
    await touchWorkspaceActivity(
      a.scope,
      bRows.workspaceId,
      new Date(Date.now() + 60_000),
      processBerth().db,
    );
    expect((await getWorkspace(b.scope, bRows.workspaceId, processBerth().db)).lastActivityAt).toEqual(
      before.lastActivityAt,
    );
    expect(await releaseWorkspaceLease(a.scope, bRows.workspaceId, "turn:1", processBerth().db)).toBe(false);
    expect(await listWorkspaceLeases(a.scope, bRows.workspaceId, processBerth().db)).toEqual([]);
    await expectAppError(
      appendWorkspaceEvent(a.scope, bRows.workspaceId, { kind: "bumped" }, processBerth().db),
      "NOT_FOUND",
    );
    expect(await listWorkspaceEvents(a.scope, bRows.workspaceId, undefined, processBerth().db)).toEqual([]);

    const bWorkspace = await getWorkspace(b.scope, bRows.workspaceId, processBerth().db);
    expect(bWorkspace).toMatchObject({ state: "PENDING", backendKind: "local", activeLeases: 1 });
    expect(
      (await listWorkspaceEvents(b.scope, bRows.workspaceId, undefined, processBerth().db))
        .map((e) => e.kind)
        .sort(),
    ).toEqual(["created", "lease_acquired"]);
  });
});
