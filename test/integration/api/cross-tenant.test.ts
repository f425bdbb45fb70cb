/**
 * THE cross-tenant test: for every procedure in appRouter (read from the router, so a new procedure
 * without a case here fails the first test), tenant A's strongest callers cannot read or change
 * tenant B's rows, and B's data is byte-for-byte the same afterwards. Also: viewers cannot call any
 * mutation. Callers authenticate for real (session cookie from a real sign-in, Bearer API keys).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as uploadFile } from "@/app/api/workspaces/[id]/files/route";
import { POST as uploadSkill } from "@/app/api/workspaces/[id]/skills/route";
import { createCaller } from "@/server/api/root";
import { type ApiRuntime } from "@/server/api/context";
import { randomBytes, randomUUID } from "node:crypto";
import { resolveTenantScope } from "@/server/auth/resolve";
import { secretKeyFromBytes } from "@/server/auth/secrets";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { addMember } from "@/server/modules/member/member.data";
import { createAgent } from "@/server/modules/agent/agent.data";
import { createSession } from "@/server/modules/session/session.data";
import { insertCheckpoint } from "@/server/modules/checkpoint/checkpoint.data";
import { getDb } from "@/server/db";
import { upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { contextFromHeaders, createTestApiRuntime } from "./support/api-test-runtime";
import { createInvite, inviteLinkSecret } from "@/server/modules/member/invite.service";
import { addLibraryEntry } from "@/server/modules/library/library.service";
import { allProcedurePaths, callByPath, procedureType, rejectionCode } from "./support/call-by-path";
import {
  createTenantFixture,
  FIXTURE_PASSWORD,
  signInCookie,
  type TenantFixture,
} from "./support/tenant-fixtures";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

type Input = Record<string, unknown>;

type CrossTenantCase =
  | {
      kind: "tenant";
      /** A valid input against tenant `t`'s own rows, without the tenant reference. */
      input: (t: TenantFixture) => Input;
      /** True when the input names rows (ids): then "A's tenant, B's row ids" is attacked too. */
      targetsRows: boolean;
    }
  | {
      kind: "custom";
      /** For procedures that take no tenant: asserts A's caller sees nothing of B. */
      check: (caller: ReturnType<typeof createCaller>, a: TenantFixture, b: TenantFixture) => Promise<void>;
    };

/**
 * `operator.*` sits above tenants: no tenant's owner, admin, viewer or API key may call any of it, whatever
 * tenant the input names (B's, to try to read or change another tenant), so each answers FORBIDDEN.
 */
const OPERATOR_INPUTS: Record<string, (b: TenantFixture) => Input> = {
  "operator.me": () => ({}),
  "operator.warmPools": () => ({}),
  "operator.tenants.list": () => ({}),
  "operator.tenants.get": (b) => ({ tenantId: b.tenant.id }),
  "operator.tenants.create": () => ({ name: "Probe", slug: `probe-${randomUUID().slice(0, 8)}` }),
  "operator.tenants.inviteOwner": (b) => ({ tenantId: b.tenant.id }),
  "operator.tenants.suspend": (b) => ({ tenantId: b.tenant.id }),
  "operator.tenants.resume": (b) => ({ tenantId: b.tenant.id }),
  "operator.tenants.delete": (b) => ({ tenantId: b.tenant.id }),
  "operator.tenants.setQuotaOverrides": (b) => ({ tenantId: b.tenant.id, overrides: { liveWorkspaces: 1 } }),
  "operator.tenants.quota": (b) => ({ tenantId: b.tenant.id }),
  "operator.tenants.deletionReceipts": () => ({}),
  "operator.operators.list": () => ({}),
  "operator.operators.grant": (b) => ({ email: b.owner.email }),
  "operator.operators.revoke": (b) => ({ email: b.owner.email }),
  "operator.audit": () => ({}),
};

function operatorOnly(path: string): CrossTenantCase {
  return {
    kind: "custom",
    async check(caller, _a, b) {
      expect(await rejectionCode(callByPath(caller, path, OPERATOR_INPUTS[path]!(b))), path).toBe(
        "FORBIDDEN",
      );
    },
  };
}

const CASES: Record<string, CrossTenantCase> = {
  "tenant.me": {
    kind: "custom",
    async check(caller, a, b) {
      const me = (await caller.tenant.me()) as { tenants: { id: string }[] };
      expect(me.tenants.map((t) => t.id)).toContain(a.tenant.id);
      expect(me.tenants.map((t) => t.id)).not.toContain(b.tenant.id);
    },
  },
  "tenant.overview": { kind: "tenant", input: () => ({}), targetsRows: false },
  "tenant.policy": { kind: "tenant", input: () => ({}), targetsRows: false },
  "tenant.setPolicy": { kind: "tenant", input: () => ({ stdioMcpMinRole: "member" }), targetsRows: false },
  // quota.* (issue 15): the tenant's limits, usage and budget.
  "quota.usage": { kind: "tenant", input: () => ({}), targetsRows: false },
  "quota.setBudget": {
    kind: "tenant",
    input: () => ({ monthlyBudgetUnits: 1, hardStop: true }),
    targetsRows: false,
  },
  "account.changePassword": {
    kind: "custom",
    // Not tenant-scoped: it only ever acts on the caller's own account (a wrong current password changes nothing).
    async check(caller) {
      expect(
        await rejectionCode(
          caller.account.changePassword({ currentPassword: "not-the-password", newPassword: "whatever-123" }),
        ),
      ).toBe("BAD_REQUEST");
    },
  },
  "member.list": { kind: "tenant", input: () => ({}), targetsRows: false },
  "member.changeRole": {
    kind: "tenant",
    input: (t) => ({ userId: t.viewer.id, role: "member" }),
    targetsRows: true,
  },
  "member.remove": { kind: "tenant", input: (t) => ({ userId: t.viewer.id }), targetsRows: true },
  "apiKey.list": { kind: "tenant", input: () => ({ includeRevoked: true }), targetsRows: false },
  "apiKey.create": {
    kind: "tenant",
    input: () => ({ name: "cross-tenant probe", role: "viewer" }),
    targetsRows: false,
  },
  "invite.create": { kind: "tenant", input: () => ({ role: "viewer" }), targetsRows: false },
  "invite.list": { kind: "tenant", input: () => ({}), targetsRows: false },
  "invite.revoke": { kind: "tenant", input: (t) => ({ inviteId: rowsOf(t).inviteId }), targetsRows: true },
  "apiKey.revoke": { kind: "tenant", input: (t) => ({ apiKeyId: t.viewerKey.id }), targetsRows: true },
  "audit.list": { kind: "tenant", input: () => ({ limit: 200 }), targetsRows: false },
  "audit.facets": { kind: "tenant", input: () => ({}), targetsRows: false },
  "audit.exportCsv": { kind: "tenant", input: () => ({}), targetsRows: false },
  ...Object.fromEntries(Object.keys(OPERATOR_INPUTS).map((path) => [path, operatorOnly(path)])),
  // workspace.* (H8): every procedure names a workspace of the tenant (a PENDING binding made in beforeAll),
  // so none of them provisions anything; B's id under A's tenant must be NOT_FOUND.
  "workspace.list": { kind: "tenant", input: () => ({}), targetsRows: false },
  "workspace.backend": { kind: "tenant", input: () => ({}), targetsRows: false },
  "workspace.backends": { kind: "tenant", input: () => ({}), targetsRows: false },
  "workspace.setDefaultBackend": {
    kind: "tenant",
    input: () => ({ defaultBackend: "local" }),
    targetsRows: false,
  },
  "workspace.get": { kind: "tenant", input: (t) => ({ workspaceId: workspaceOf(t) }), targetsRows: true },
  "workspace.events": { kind: "tenant", input: (t) => ({ workspaceId: workspaceOf(t) }), targetsRows: true },
  "workspace.stop": { kind: "tenant", input: (t) => ({ workspaceId: workspaceOf(t) }), targetsRows: true },
  "workspace.purge": { kind: "tenant", input: (t) => ({ workspaceId: workspaceOf(t) }), targetsRows: true },
  "workspace.start": { kind: "tenant", input: (t) => ({ workspaceId: workspaceOf(t) }), targetsRows: true },
  "workspace.setLabel": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), label: "probe" }),
    targetsRows: true,
  },
  // Per-workspace outcomes: B's workspace under A's tenant is a NOT_FOUND outcome ("reports B's workspaces" below).
  "workspace.bulk": {
    kind: "tenant",
    input: (t) => ({ action: "stop", workspaceIds: [workspaceOf(t)] }),
    targetsRows: false,
  },
  // live.* : a tenant's change stream; B's tenant is refused before it starts.
  "live.changes": { kind: "tenant", input: () => ({}), targetsRows: false },
  "workspace.status": { kind: "tenant", input: (t) => ({ workspaceId: workspaceOf(t) }), targetsRows: true },
  "workspace.purgeReceipts": { kind: "tenant", input: () => ({}), targetsRows: false },
  "workspace.previews.list": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t) }),
    targetsRows: true,
  },
  "workspace.previews.expose": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), port: 4000 }),
    targetsRows: true,
  },
  "workspace.previews.unexpose": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), port: 3000 }),
    targetsRows: true,
  },
  "workspace.previews.shareLink": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), port: 3000 }),
    targetsRows: true,
  },
  "workspace.mcp.list": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t) }),
    targetsRows: true,
  },
  "workspace.mcp.add": {
    kind: "tenant",
    input: (t) => ({
      workspaceId: workspaceOf(t),
      declaration: {
        name: "probe",
        is_stateful: false,
        mcp_config: { type: "http_mcp", url: "http://127.0.0.1:9/mcp" },
      },
    }),
    targetsRows: true,
  },
  "workspace.mcp.remove": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), name: "probe" }),
    targetsRows: true,
  },
  "workspace.skill.list": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t) }),
    targetsRows: true,
  },
  "workspace.skill.remove": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), name: "probe" }),
    targetsRows: true,
  },
  "workspace.files.list": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t) }),
    targetsRows: true,
  },
  "workspace.files.read": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), path: "notes.txt" }),
    targetsRows: true,
  },
  "workspace.files.write": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), path: "notes.txt", content: "probe" }),
    targetsRows: true,
  },
  "workspace.files.mkdir": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), path: "probe-dir" }),
    targetsRows: true,
  },
  "workspace.files.delete": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), path: "notes.txt" }),
    targetsRows: true,
  },
  "workspace.files.downloadToken": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), path: "notes.txt" }),
    targetsRows: true,
  },
  // egress.* (issue 25): policies and secrets of the tenant and of an agent (rows made in beforeAll), and a
  // workspace's refusals; B's agent, secret and workspace ids under A's tenant must be NOT_FOUND.
  "egress.tenantPolicy": { kind: "tenant", input: () => ({}), targetsRows: false },
  "egress.setTenantPolicy": {
    kind: "tenant",
    input: () => ({ policy: { mode: "allowlist", allow: [{ host: "probe.example.com" }] } }),
    targetsRows: false,
  },
  "egress.agentPolicy": { kind: "tenant", input: (t) => ({ agentId: rowsOf(t).agentId }), targetsRows: true },
  "egress.setAgentPolicy": {
    kind: "tenant",
    input: (t) => ({ agentId: rowsOf(t).agentId, policy: { mode: "open", allow: [] } }),
    targetsRows: true,
  },
  "egress.tenantSecrets": { kind: "tenant", input: () => ({}), targetsRows: false },
  "egress.createTenantSecret": {
    kind: "tenant",
    input: () => ({
      name: `probe-${randomUUID().slice(0, 8)}`,
      value: "probe-value",
      hosts: ["example.com"],
    }),
    targetsRows: false,
  },
  "egress.deleteTenantSecret": {
    kind: "tenant",
    input: (t) => ({ secretId: egressRowsOf(t).tenantSecretId }),
    targetsRows: true,
  },
  "egress.agentSecrets": {
    kind: "tenant",
    input: (t) => ({ agentId: rowsOf(t).agentId }),
    targetsRows: true,
  },
  "egress.createAgentSecret": {
    kind: "tenant",
    input: (t) => ({
      agentId: rowsOf(t).agentId,
      name: `probe-${randomUUID().slice(0, 8)}`,
      value: "probe-value",
      hosts: ["example.com"],
    }),
    targetsRows: true,
  },
  "egress.deleteAgentSecret": {
    kind: "tenant",
    input: (t) => ({ agentId: rowsOf(t).agentId, secretId: egressRowsOf(t).agentSecretId }),
    targetsRows: true,
  },
  "egress.workspaceStatus": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t) }),
    targetsRows: true,
  },
  // agent.*, session.*, chat.*, jobs.* (H9): rows made per tenant in beforeAll (an agent, a session of it,
  // a waiting session.purge job); B's ids under A's tenant must be NOT_FOUND, and nothing of B may change.
  "agent.create": {
    kind: "tenant",
    input: () => ({ name: `probe-${randomUUID().slice(0, 8)}`, modelConfig: { model: "m" } }),
    targetsRows: false,
  },
  "agent.list": { kind: "tenant", input: () => ({}), targetsRows: false },
  "agent.get": { kind: "tenant", input: (t) => ({ agentId: rowsOf(t).agentId }), targetsRows: true },
  "agent.update": {
    kind: "tenant",
    input: (t) => ({ agentId: rowsOf(t).agentId, patch: { description: "probe" } }),
    targetsRows: true,
  },
  "agent.delete": { kind: "tenant", input: (t) => ({ agentId: rowsOf(t).agentId }), targetsRows: true },
  "agent.testConnection": {
    kind: "tenant",
    input: (t) => ({ agentId: rowsOf(t).agentId }),
    targetsRows: true,
  },
  "session.create": {
    kind: "tenant",
    input: (t) => ({ agentId: rowsOf(t).agentId, workspaceId: workspaceOf(t) }),
    targetsRows: true,
  },
  "session.list": { kind: "tenant", input: () => ({}), targetsRows: false },
  "session.get": { kind: "tenant", input: (t) => ({ sessionId: rowsOf(t).sessionId }), targetsRows: true },
  "session.delete": { kind: "tenant", input: (t) => ({ sessionId: rowsOf(t).sessionId }), targetsRows: true },
  "session.update": {
    kind: "tenant",
    input: (t) => ({ sessionId: rowsOf(t).sessionId, patch: { name: "probe", env: { PROBE: "x" } } }),
    targetsRows: true,
  },
  "chat.send": {
    kind: "tenant",
    input: (t) => ({ sessionId: rowsOf(t).sessionId, message: "hello" }),
    targetsRows: true,
  },
  "chat.cancel": { kind: "tenant", input: (t) => ({ sessionId: rowsOf(t).sessionId }), targetsRows: true },
  "chat.history": { kind: "tenant", input: (t) => ({ sessionId: rowsOf(t).sessionId }), targetsRows: true },
  "chat.turns": { kind: "tenant", input: (t) => ({ sessionId: rowsOf(t).sessionId }), targetsRows: true },
  // The stream procedures check the session before they stream: B's session is refused, never followed.
  "chat.attach": { kind: "tenant", input: (t) => ({ sessionId: rowsOf(t).sessionId }), targetsRows: true },
  "chat.follow": { kind: "tenant", input: (t) => ({ sessionId: rowsOf(t).sessionId }), targetsRows: true },
  // checkpoint.* (issue 24): B's session, checkpoint and restore ids are out of A's reach.
  "checkpoint.list": {
    kind: "tenant",
    input: (t) => ({ sessionId: rowsOf(t).sessionId }),
    targetsRows: true,
  },
  "checkpoint.diff": {
    kind: "tenant",
    input: (t) => ({ sessionId: rowsOf(t).sessionId, checkpointId: rowsOf(t).checkpointId }),
    targetsRows: true,
  },
  "checkpoint.fileDiff": {
    kind: "tenant",
    input: (t) => ({ sessionId: rowsOf(t).sessionId, checkpointId: rowsOf(t).checkpointId, path: "a.txt" }),
    targetsRows: true,
  },
  "checkpoint.revert": {
    kind: "tenant",
    input: (t) => ({ sessionId: rowsOf(t).sessionId, checkpointId: rowsOf(t).checkpointId }),
    targetsRows: true,
  },
  "checkpoint.fork": {
    kind: "tenant",
    input: (t) => ({ sessionId: rowsOf(t).sessionId, checkpointId: rowsOf(t).checkpointId }),
    targetsRows: true,
  },
  "checkpoint.restore": {
    kind: "tenant",
    input: (t) => ({ restoreId: rowsOf(t).restoreId }),
    targetsRows: true,
  },
  // library.* (issue 12): an MCP and a skill entry per tenant (beforeAll); B's entry ids under A's tenant are
  // NOT_FOUND, and installing B's entry goes nowhere.
  "library.list": { kind: "tenant", input: () => ({}), targetsRows: false },
  "library.get": { kind: "tenant", input: (t) => ({ entryId: rowsOf(t).mcpEntryId }), targetsRows: true },
  "library.create": {
    kind: "tenant",
    input: () => ({ kind: "MCP", declaration: probeMcp(`probe-${randomUUID().slice(0, 8)}`) }),
    targetsRows: false,
  },
  "library.update": {
    kind: "tenant",
    input: (t) => ({ entryId: rowsOf(t).mcpEntryId, patch: { description: "probe" } }),
    targetsRows: true,
  },
  "library.delete": { kind: "tenant", input: (t) => ({ entryId: rowsOf(t).mcpEntryId }), targetsRows: true },
  "library.equip": {
    kind: "tenant",
    input: (t) => ({ entryId: rowsOf(t).mcpEntryId, agentId: rowsOf(t).agentId }),
    targetsRows: true,
  },
  "workspace.mcp.addFromLibrary": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), entryId: rowsOf(t).mcpEntryId }),
    targetsRows: true,
  },
  "workspace.skill.addFromLibrary": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), entryId: rowsOf(t).skillEntryId }),
    targetsRows: true,
  },
  "jobs.list": { kind: "tenant", input: () => ({}), targetsRows: false },
  "jobs.retry": { kind: "tenant", input: (t) => ({ jobId: rowsOf(t).jobId }), targetsRows: true },
  // operations.* (issue 16): a webhook endpoint per tenant (beforeAll) on a public IP literal (no DNS).
  "operations.readiness": {
    kind: "tenant",
    input: () => ({ from: new Date(Date.now() - 86_400_000), to: new Date() }),
    targetsRows: false,
  },
  "operations.activity": { kind: "tenant", input: () => ({}), targetsRows: false },
  "operations.webhooks": { kind: "tenant", input: () => ({}), targetsRows: false },
  "operations.createWebhook": {
    kind: "tenant",
    input: () => ({ url: PROBE_WEBHOOK_URL, events: ["turn.failed"] }),
    targetsRows: false,
  },
  "operations.deleteWebhook": {
    kind: "tenant",
    input: (t) => ({ endpointId: rowsOf(t).webhookId }),
    targetsRows: true,
  },
  "operations.testWebhook": {
    kind: "tenant",
    input: (t) => ({ endpointId: rowsOf(t).webhookId }),
    targetsRows: true,
  },
  "operations.webhookDeliveries": {
    kind: "tenant",
    input: (t) => ({ endpointId: rowsOf(t).webhookId }),
    targetsRows: true,
  },
  "operations.usage": { kind: "tenant", input: () => ({}), targetsRows: false },
  "operations.trends": { kind: "tenant", input: () => ({}), targetsRows: false },
  "operations.gettingStarted": { kind: "tenant", input: () => ({}), targetsRows: false },
  "operations.queueDepth": { kind: "tenant", input: () => ({}), targetsRows: false },
  "operations.workspaceTimings": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t) }),
    targetsRows: true,
  },
  "operations.workspaceTimeline": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t) }),
    targetsRows: true,
  },
  "operations.workspaceResources": {
    kind: "tenant",
    input: (t) => ({ workspaceId: workspaceOf(t), range: "1h" }),
    targetsRows: true,
  },
  // backendSettings.* (issue 13): a tenant's own E2B team, admins only.
  "backendSettings.forms": { kind: "tenant", input: () => ({}), targetsRows: false },
  "backendSettings.read": { kind: "tenant", input: () => ({ backend: "e2b" }), targetsRows: false },
  "backendSettings.set": {
    kind: "tenant",
    input: () => ({ backend: "e2b", settings: { template: "probe" } }),
    targetsRows: false,
  },
  "backendSettings.clear": {
    kind: "tenant",
    input: () => ({ backend: "e2b", confirm: true }),
    targetsRows: false,
  },
};

/** A public address literal (example.com's): registering it needs no DNS, and nothing is delivered here. */
const PROBE_WEBHOOK_URL = "https://93.184.215.14/berth-cross-tenant-probe";

/** An HTTP MCP declaration nothing ever dials (port 9, discard). */
const probeMcp = (name: string) => ({
  name,
  is_stateful: false,
  mcp_config: { type: "http_mcp" as const, url: "http://127.0.0.1:9/mcp" },
});

/** Per tenant: an agent, a session of it, a (waiting) job, an invite and library entries. */
const tenantRows = new Map<
  string,
  {
    agentId: string;
    sessionId: string;
    jobId: string;
    inviteId: string;
    mcpEntryId: string;
    skillEntryId: string;
    webhookId: string;
    checkpointId: string;
    restoreId: string;
  }
>();
function rowsOf(t: TenantFixture) {
  const rows = tenantRows.get(t.tenant.id);
  if (!rows) throw new Error(`no agent/session fixture for tenant ${t.tenant.slug}`);
  return rows;
}

/** Per tenant: a tenant secret and an agent secret (egress.*). */
const egressRows = new Map<string, { tenantSecretId: string; agentSecretId: string }>();
function egressRowsOf(t: TenantFixture) {
  const rows = egressRows.get(t.tenant.id);
  if (!rows) throw new Error(`no egress fixture for tenant ${t.tenant.slug}`);
  return rows;
}

/** One workspace binding per tenant (created in beforeAll), for the workspace.* cases. */
const workspaceIds = new Map<string, string>();
function workspaceOf(t: TenantFixture): string {
  const id = workspaceIds.get(t.tenant.id);
  if (!id) throw new Error(`no workspace fixture for tenant ${t.tenant.slug}`);
  return id;
}

const DENIED = ["FORBIDDEN", "NOT_FOUND"];

let runtime: ApiRuntime;
let a: TenantFixture;
let b: TenantFixture;

const callerWith = (headers: HeadersInit) => createCaller(contextFromHeaders(runtime, headers));
const cookieCaller = (user: { cookie: string }) => callerWith({ cookie: user.cookie });
const keyCaller = (key: { plainKey: string }) => callerWith({ authorization: `Bearer ${key.plainKey}` });

/** Everything of tenant B the API can show, read as B's owner. */
async function snapshotOfB() {
  const bOwner = cookieCaller(b.owner);
  const ref = { tenantId: b.tenant.id };
  return {
    overview: await bOwner.tenant.overview(ref),
    policy: await bOwner.tenant.policy(ref),
    backends: await bOwner.workspace.backends(ref),
    members: await bOwner.member.list(ref),
    apiKeys: await bOwner.apiKey.list({ ...ref, includeRevoked: true }),
    audit: await bOwner.audit.list({ ...ref, limit: 200 }),
    workspace: await bOwner.workspace.get({ ...ref, workspaceId: workspaceOf(b) }),
    agent: await bOwner.agent.get({ ...ref, agentId: rowsOf(b).agentId }),
    sessions: await bOwner.session.list(ref),
    history: await bOwner.chat.history({ ...ref, sessionId: rowsOf(b).sessionId }),
    jobs: await bOwner.jobs.list(ref),
    invites: await bOwner.invite.list(ref),
    library: await bOwner.library.list(ref),
    webhooks: await bOwner.operations.webhooks(ref),
    webhookDeliveries: await bOwner.operations.webhookDeliveries(ref),
    quota: await bOwner.quota.usage(ref),
    previews: await bOwner.workspace.previews.list({ ...ref, workspaceId: workspaceOf(b) }),
    egressPolicy: await bOwner.egress.tenantPolicy(ref),
    egressAgentPolicy: await bOwner.egress.agentPolicy({ ...ref, agentId: rowsOf(b).agentId }),
    egressSecrets: await bOwner.egress.tenantSecrets(ref),
    egressAgentSecrets: await bOwner.egress.agentSecrets({ ...ref, agentId: rowsOf(b).agentId }),
    egressStatus: await bOwner.egress.workspaceStatus({ ...ref, workspaceId: workspaceOf(b) }),
  };
}

beforeAll(async () => {
  runtime = createTestApiRuntime();
  [a, b] = await Promise.all([createTenantFixture(runtime, "a"), createTenantFixture(runtime, "b")]);
  for (const t of [a, b]) {
    const id = `xt${randomUUID().replaceAll("-", "")}`;
    await upsertWorkspaceBinding(
      t.ownerScope,
      { id, backendKind: "local", isolationPolicy: "PER_AGENT" },
      { config: processBerth().config.quotas },
      processBerth().db,
    );
    // An exposed port, so share links of the tenant's own workspace are valid inputs.
    await getDb().workspacePreview.create({ data: { tenantId: t.tenant.id, workspaceId: id, port: 3000 } });
    workspaceIds.set(t.tenant.id, id);
    const agent = await createAgent(
      t.ownerScope,
      { name: `xt-agent-${randomUUID().slice(0, 8)}`, modelConfig: { provider: "openai", model: "m" } },
      secretKeyFromBytes(randomBytes(32)),
      processBerth().db,
    );
    const session = await createSession(
      t.ownerScope,
      { agentId: agent.id, workspaceId: id },
      processBerth().db,
    );
    const { jobId } = await processBerth().workspaces.service.enqueueSessionPurge(t.ownerScope, {
      workspaceId: id,
      agentId: agent.id,
      sessionIds: [session.id],
    });
    const { invite } = await createInvite(
      t.ownerScope,
      { role: "viewer" },
      inviteLinkSecret(processBerth().config),
      processBerth().db,
    );
    const mcpEntry = await addLibraryEntry(
      t.ownerScope,
      { kind: "MCP", declaration: probeMcp("xt-probe") },
      processBerth().audit,
      processBerth().db,
    );
    const skillEntry = await addLibraryEntry(
      t.ownerScope,
      {
        kind: "SKILL",
        skill: { kind: "inline", name: "xt-skill", description: "probe", instructions: "probe" },
      },
      processBerth().audit,
      processBerth().db,
    );
    // A (FAILED, so fileless) checkpoint of the session and a finished restore: rows to aim at.
    const checkpoint = await insertCheckpoint(
      t.ownerScope,
      {
        workspaceId: id,
        generation: 1,
        sessionId: session.id,
        turnId: null,
        status: "FAILED",
        error: "probe",
      },
      processBerth().db,
    );
    const restore = await getDb().checkpointRestore.create({
      data: {
        tenantId: t.tenant.id,
        kind: "REVERT",
        checkpointId: checkpoint.id,
        workspaceId: id,
        sessionId: session.id,
        status: "FAILED",
      },
    });
    const egress = processBerth().egress;
    const secret = { value: "xt-secret-value", hosts: ["example.com"] };
    egressRows.set(t.tenant.id, {
      tenantSecretId: (await egress.createSecret(t.ownerScope, undefined, { ...secret, name: "xt-tenant" }))
        .id,
      agentSecretId: (await egress.createSecret(t.ownerScope, agent.id, { ...secret, name: "xt-agent" })).id,
    });
    tenantRows.set(t.tenant.id, {
      checkpointId: checkpoint.id,
      restoreId: restore.id,
      agentId: agent.id,
      sessionId: session.id,
      jobId: jobId ?? "",
      inviteId: invite.id,
      mcpEntryId: mcpEntry.id,
      skillEntryId: skillEntry.id,
      webhookId: (
        await processBerth().webhooks.create(t.ownerScope, {
          url: PROBE_WEBHOOK_URL,
          events: ["workspace.ready"],
        })
      ).endpoint.id,
    });
  }
});

afterAll(async () => {
  await closeProcessBerth();
});

describe("cross-tenant isolation", () => {
  it("has a case for every procedure in appRouter", () => {
    expect(Object.keys(CASES).sort()).toEqual(allProcedurePaths());
  });

  it("denies tenant A's owner (cookie) and admin key (Bearer) every read or change of tenant B", async () => {
    const before = await snapshotOfB();
    const attackers = [
      { name: "A owner (cookie)", caller: cookieCaller(a.owner), isApiKey: false },
      { name: "A admin key", caller: keyCaller(a.adminKey), isApiKey: true },
    ];
    const outcomes: string[] = [];
    for (const path of allProcedurePaths()) {
      const testCase = CASES[path];
      if (!testCase) continue; // reported by the first test
      for (const { name, caller, isApiKey } of attackers) {
        if (testCase.kind === "custom") {
          await testCase.check(caller, a, b);
          continue;
        }
        const foreign = testCase.input(b);
        const attempts: Input[] = [
          { ...foreign, tenantId: b.tenant.id },
          { ...foreign, tenantSlug: b.tenant.slug },
        ];
        // A's own tenant, but B's row ids: the data layer's tenant filter must answer NOT_FOUND.
        if (testCase.targetsRows) attempts.push({ ...foreign, tenantId: a.tenant.id });
        // An API key without a tenant reference gets its own tenant; B's rows must still be out of reach.
        if (testCase.targetsRows && isApiKey) attempts.push({ ...foreign });
        for (const input of attempts) {
          const code = await rejectionCode(callByPath(caller, path, input));
          outcomes.push(`${path} by ${name} with ${JSON.stringify(Object.keys(input))}: ${code}`);
          expect(DENIED, `${path} by ${name} with ${JSON.stringify(input)}`).toContain(code);
        }
      }
    }
    expect(outcomes.length).toBeGreaterThan(0);
    expect(await snapshotOfB()).toEqual(before);
  });

  it("reports B's workspaces as not found in a bulk action under A's tenant, and leaves them alone", async () => {
    const before = await snapshotOfB();
    for (const caller of [cookieCaller(a.owner), keyCaller(a.adminKey)]) {
      for (const action of ["stop", "start", "purge"] as const) {
        const answer = await caller.workspace.bulk({
          tenantId: a.tenant.id,
          action,
          workspaceIds: [workspaceOf(b)],
          force: true,
        });
        expect(answer.results).toMatchObject([{ ok: false, error: { code: "NOT_FOUND" } }]);
      }
    }
    expect(await snapshotOfB()).toEqual(before);
  });

  it("keeps B's API keys usable only in B", async () => {
    const bKey = keyCaller(b.adminKey);
    const overview = await bKey.tenant.overview({});
    expect(overview.tenant.id).toBe(b.tenant.id);
    expect(await rejectionCode(bKey.tenant.overview({ tenantId: a.tenant.id }))).toBe("FORBIDDEN");
  });
});

describe("role gates", () => {
  it("lets a viewer (cookie or viewer key) call no mutation at all", async () => {
    const mutations = allProcedurePaths().filter((path) => procedureType(path) === "mutation");
    expect(mutations.length).toBeGreaterThan(0);
    for (const path of mutations) {
      const testCase = CASES[path];
      if (path === "account.changePassword") continue; // the caller's own account: viewers may change theirs
      const operatorInput = OPERATOR_INPUTS[path];
      if (operatorInput) {
        expect(await rejectionCode(callByPath(cookieCaller(a.viewer), path, operatorInput(a))), path).toBe(
          "FORBIDDEN",
        );
        expect(await rejectionCode(callByPath(keyCaller(a.viewerKey), path, operatorInput(a))), path).toBe(
          "FORBIDDEN",
        );
        continue;
      }
      if (testCase?.kind !== "tenant") throw new Error(`mutation ${path} needs a tenant case`);
      const input = { ...testCase.input(a), tenantId: a.tenant.id };
      expect(await rejectionCode(callByPath(cookieCaller(a.viewer), path, input)), path).toBe("FORBIDDEN");
      expect(await rejectionCode(callByPath(keyCaller(a.viewerKey), path, input)), path).toBe("FORBIDDEN");
    }
  });

  it("lets a viewer read the overview but not API keys or the audit log", async () => {
    const viewer = cookieCaller(a.viewer);
    const ref = { tenantId: a.tenant.id };
    expect((await viewer.tenant.overview(ref)).role).toBe("viewer");
    expect(await rejectionCode(viewer.apiKey.list(ref))).toBe("FORBIDDEN");
    expect(await rejectionCode(viewer.audit.list(ref))).toBe("FORBIDDEN");
  });

  it("rejects anonymous and bad-key callers as UNAUTHORIZED", async () => {
    expect(await rejectionCode(callerWith({}).tenant.overview({ tenantId: a.tenant.id }))).toBe(
      "UNAUTHORIZED",
    );
    const badKey = callerWith({ authorization: "Bearer berth_not-a-real-key" });
    expect(await rejectionCode(badKey.tenant.overview({ tenantId: a.tenant.id }))).toBe("UNAUTHORIZED");
  });
});

/**
 * Cross-member: inside ONE tenant a member acts only on the workspaces of their own sessions (admins on all,
 * viewers read all). Enumerates every workspace-keyed procedure (from CASES, so a new one is covered) and the
 * skill upload route, as the member's cookie against the owner's workspace, and as a member-role API key the
 * owner created (it acts for the owner's sessions only) against the member's workspace: each must answer
 * NOT_FOUND (or FORBIDDEN where the role gate already refuses) and the workspace stay unchanged.
 */
describe("cross-member isolation inside a tenant", () => {
  let member: { id: string; cookie: string };
  let ownersMemberKey: string;
  let memberWorkspaceId: string;

  const workspaceKeyedPaths = () =>
    Object.entries(CASES)
      .filter(([, c]) => c.kind === "tenant" && "workspaceId" in c.input(a))
      .map(([path]) => path)
      .filter((path) => path !== "session.create") // binding rules: session.policy mayShareWorkspace
      .sort();

  beforeAll(async () => {
    const email = `member-a-${randomUUID().slice(0, 8)}@example.test`;
    const { user } = await runtime.auth.api.signUpEmail({
      body: { email, password: FIXTURE_PASSWORD, name: "Member A" },
    });
    await addMember(a.ownerScope, { userId: user.id, role: "member" }, processBerth().db);
    const scope = await resolveTenantScope(
      { kind: "user", userId: user.id, email, name: "Member A", authSessionId: "fixture" },
      a.tenant.id,
      processBerth().db,
    );
    ownersMemberKey = (
      await createApiKey(
        runtime.auth,
        a.ownerScope,
        { name: "member-role key", role: "member" },
        apiKeySecret(processBerth().config),
        processBerth().db,
      )
    ).plainKey;
    member = { id: user.id, cookie: await signInCookie(runtime.auth, email, FIXTURE_PASSWORD) };
    memberWorkspaceId = `xm${randomUUID().replaceAll("-", "")}`;
    await upsertWorkspaceBinding(
      a.ownerScope,
      {
        id: memberWorkspaceId,
        backendKind: "local",
        isolationPolicy: "PER_AGENT",
      },
      { config: processBerth().config.quotas },
      processBerth().db,
    );
    await createSession(
      scope,
      { agentId: rowsOf(a).agentId, workspaceId: memberWorkspaceId },
      processBerth().db,
    );
  });

  it("enumerates every workspace.* (and operations.workspace*, egress.workspaceStatus) procedure that names a workspace", () => {
    const keyed = allProcedurePaths().filter(
      (path) =>
        (path.startsWith("workspace.") ||
          path.startsWith("operations.workspace") ||
          path === "egress.workspaceStatus") &&
        ![
          "workspace.list",
          "workspace.purgeReceipts",
          "workspace.backend",
          "workspace.backends",
          "workspace.setDefaultBackend",
          // Many workspaces, admins only (the role gate refuses members before any workspace is named).
          "workspace.bulk",
        ].includes(path),
    );
    expect(workspaceKeyedPaths()).toEqual(keyed);
  });

  it("denies a member's cookie, and a member-role key, every procedure on another user's workspace", async () => {
    const attacks = [
      { name: "member cookie", caller: cookieCaller(member), target: () => workspaceOf(a) },
      {
        name: "owner's member-role key",
        caller: callerWith({ authorization: `Bearer ${ownersMemberKey}` }),
        target: () => memberWorkspaceId,
      },
    ];
    const outcomes: string[] = [];
    for (const { name, caller, target } of attacks) {
      const ownerView = () =>
        cookieCaller(a.owner).workspace.get({ tenantId: a.tenant.id, workspaceId: target() });
      const before = await ownerView();
      for (const path of workspaceKeyedPaths()) {
        const testCase = CASES[path];
        if (testCase?.kind !== "tenant") continue;
        const input = { ...testCase.input(a), workspaceId: target(), tenantId: a.tenant.id };
        const code = await rejectionCode(callByPath(caller, path, input));
        outcomes.push(`${path} by ${name}: ${code}`);
        expect(DENIED, `${path} by ${name}`).toContain(code);
      }
      expect({ ...(await ownerView()), idleMs: null }).toEqual({ ...before, idleMs: null });
    }
    expect(outcomes.length).toBe(workspaceKeyedPaths().length * 2);
  });

  it("denies the member the skill upload route on another member's workspace (404, nothing read)", async () => {
    const form = new FormData();
    form.append("manifest", JSON.stringify({ entries: [{ path: "x/SKILL.md", size: 3 }] }));
    form.append("files", new Blob(["abc"]), "SKILL.md");
    const response = await uploadSkill(
      new Request(`http://localhost:3000/api/workspaces/${workspaceOf(a)}/skills`, {
        method: "POST",
        headers: { authorization: `Bearer ${ownersMemberKey}` },
        body: form,
      }),
      { params: Promise.resolve({ id: memberWorkspaceId }) },
    );
    expect(response.status).toBe(404);
  });

  it("denies the member the file upload route on another member's workspace (404, nothing written)", async () => {
    const response = await uploadFile(
      new Request(`http://localhost:3000/api/workspaces/${memberWorkspaceId}/files?path=probe.txt`, {
        method: "POST",
        headers: { authorization: `Bearer ${ownersMemberKey}` },
        body: "probe",
      }),
      { params: Promise.resolve({ id: memberWorkspaceId }) },
    );
    expect(response.status).toBe(404);
  });

  it("lists and opens only the member's own workspaces; admins and viewers see every one", async () => {
    const ref = { tenantId: a.tenant.id };
    const mine = await cookieCaller(member).workspace.list(ref);
    expect(mine.items.map((w) => w.id)).toEqual([memberWorkspaceId]);
    expect((await cookieCaller(member).workspace.get({ ...ref, workspaceId: memberWorkspaceId })).id).toBe(
      memberWorkspaceId,
    );
    for (const caller of [cookieCaller(a.owner), keyCaller(a.adminKey), cookieCaller(a.viewer)]) {
      const ids = (await caller.workspace.list(ref)).items.map((w) => w.id);
      expect(ids).toEqual(expect.arrayContaining([memberWorkspaceId, workspaceOf(a)]));
      expect((await caller.workspace.get({ ...ref, workspaceId: memberWorkspaceId })).id).toBe(
        memberWorkspaceId,
      );
    }
  });
});
