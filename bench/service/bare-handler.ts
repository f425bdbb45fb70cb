import { createHash, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { type Queue } from "bullmq";
import { type Redis } from "ioredis";
import { type PrismaClient } from "@/generated/prisma/client";
import { listenOnLoopback, type ServedHandler } from "@/test/integration/api/support/serve-fetch-handler";
import { type Inflight } from "./inflight";

/**
 * The baseline of the HTTP figures: a bare `node:http` handler that issues the SAME storage statements as
 * Berth's `session.create` and `workspace.get` (listed from the SQL the real procedures send; the bench
 * re-checks the count per request) through the same Prisma client, but without tRPC, zod, superjson,
 * better-auth, the middlewares or the service layers. Berth's ratio to it is therefore its framework cost.
 */
export type BareDeps = {
  db: PrismaClient;
  /** Same connection role as Berth's producer: the audit RPUSH. */
  redis: Redis;
  /** The audit queue, for the same deduplicated `audit.flush` add Berth's audit buffer issues. */
  auditQueue: Queue;
  auditBufferKey: string;
  /** The session's workspace id the isolation policy assigns to the caller (a pure function of ids). */
  workspaceIdFor: (agentId: string) => string;
};

type Caller = { tenantId: string; userId: string | null; apiKeyId: string };

const gateKeySelect = {
  id: true,
  tenantId: true,
  role: true,
  createdByUserId: true,
  enabled: true,
  revokedAt: true,
  expiresAt: true,
} as const;
const leaseSelect = {
  id: true,
  workspaceId: true,
  holder: true,
  reason: true,
  expiresAt: true,
  createdAt: true,
} as const;
const eventSelect = {
  id: true,
  workspaceId: true,
  kind: true,
  reason: true,
  actor: true,
  data: true,
  at: true,
} as const;
const liveLeases = () => ({ OR: [{ expiresAt: null }, { expiresAt: { gt: new Date() } }] });
const workspaceSelect = () =>
  ({
    id: true,
    backendKind: true,
    isolationPolicy: true,
    agentId: true,
    userId: true,
    state: true,
    backendHandle: true,
    lastActivityAt: true,
    stateChangedAt: true,
    error: true,
    createdAt: true,
    updatedAt: true,
    _count: { select: { leases: { where: liveLeases() } } },
  }) as const;

function createBareHandler(deps: BareDeps) {
  const { db } = deps;

  /** Berth's key check (lookup by hash, last use at most once a minute) then its one-statement tenant gate. */
  async function authenticate(req: IncomingMessage): Promise<Caller | null> {
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "")?.[1];
    if (!bearer) return null;
    const key = await db.apiKey.findUnique({
      where: { key: createHash("sha256").update(bearer).digest("base64url") },
      select: { ...gateKeySelect, configId: true, lastUsedAt: true },
    });
    if (!key || key.enabled === false || key.revokedAt) return null;
    const now = new Date();
    if (!key.lastUsedAt || now.getTime() - key.lastUsedAt.getTime() >= 60_000) {
      await db.apiKey.updateMany({ where: { id: key.id }, data: { lastUsedAt: now } });
    }
    const rows = await db.$queryRaw<{ tenant_id: string; creator_role: string | null; ok: boolean }[]>`
      SELECT k.tenant_id, m.role::text AS creator_role, (t.id = ${key.tenantId} OR t.slug = ${key.tenantId}) AS ok
        FROM api_keys k
        JOIN tenants t ON t.id = k.tenant_id
        LEFT JOIN memberships m ON m.tenant_id = k.tenant_id AND m.user_id = k.created_by_user_id
       WHERE k.id = ${key.id}`;
    const gate = rows[0];
    if (!gate?.ok || (key.createdByUserId && !gate.creator_role)) return null;
    return { tenantId: gate.tenant_id, userId: key.createdByUserId, apiKeyId: key.id };
  }

  async function createSession(caller: Caller, agentId: string) {
    const { tenantId, userId } = caller;
    // The agent with what its workspace is decided from (its isolation policy and backend, else the
    // tenant's defaults): Berth needs them to name and bind the workspace, in this one statement.
    const [agent] = await db.$queryRaw<{ id: string; isolation_policy: string | null }[]>`
      SELECT a.id, a.isolation_policy::text AS isolation_policy, a.backend::text AS backend,
             t.default_isolation_policy::text AS default_isolation_policy,
             t.default_backend::text AS default_backend
        FROM agents a
        JOIN tenants t ON t.id = a.tenant_id
       WHERE a.tenant_id = ${tenantId} AND a.id = ${agentId}`;
    if (!agent) return null;
    const workspaceId = deps.workspaceIdFor(agent.id);
    const session = await db.$transaction(async (tx) => {
      await tx.agent.findFirst({ where: { tenantId, id: agentId }, select: { id: true } });
      if (userId) await tx.membership.findFirst({ where: { tenantId, userId }, select: { id: true } });
      // The session's workspace binding, in the session's transaction: it exists (the bench's first
      // session.create wrote it), so Berth only reads it. Only a new id would take the quota lock.
      await tx.workspace.findFirst({ where: { tenantId, id: workspaceId }, select: workspaceSelect() });
      return tx.session.create({
        data: { tenantId, agentId, userId, workspaceId, name: "", leaderSessionId: null },
        select: { id: true, workspaceId: true },
      });
    });
    const audit = {
      id: randomUUID(),
      tenantId,
      action: "session.create",
      targetType: "session",
      targetId: session.id,
      outcome: "success",
      actorType: "api_key",
      actorId: caller.apiKeyId,
      details: { agentId, workspaceId },
      at: new Date().toISOString(),
    };
    await deps.redis.rpush(deps.auditBufferKey, JSON.stringify(audit));
    await deps.auditQueue.add(
      "audit.flush",
      { trigger: "write" },
      { attempts: 5, deduplication: { id: "audit.flush" } },
    );
    return { sessionId: session.id, workspaceId: session.workspaceId };
  }

  async function getWorkspace(caller: Caller, workspaceId: string) {
    const { tenantId } = caller;
    const record = await db.workspace.findFirst({
      where: { tenantId, id: workspaceId },
      select: workspaceSelect(),
    });
    if (!record) return null;
    const [leases, events, [context]] = await Promise.all([
      db.workspaceLease.findMany({
        where: { tenantId, workspaceId, ...liveLeases() },
        select: leaseSelect,
        orderBy: { createdAt: "asc" },
      }),
      // One more than the page shows: Berth knows from it whether the page holds every event, and so
      // whether the newest state change is among them (it then needs no read of its own).
      db.workspaceEvent.findMany({
        where: { tenantId, workspaceId },
        select: eventSelect,
        orderBy: [{ at: "desc" }, { id: "desc" }],
        take: 51,
      }),
      // The page shows the agent's name and why the workspace is still running, which needs the
      // tenant's idle TTL: Berth reads both in this one statement.
      db.$queryRaw<{ agent_name: string | null; workspace_idle_ttl_ms: number | null }[]>`
        SELECT a.name AS agent_name, t.workspace_idle_ttl_ms
          FROM tenants t
          LEFT JOIN agents a ON a.tenant_id = t.id AND a.id = ${record.agentId}
         WHERE t.id = ${tenantId}`,
    ]);
    return {
      ...record,
      agentName: context?.agent_name ?? null,
      idleTtlMs: context?.workspace_idle_ttl_ms ?? null,
      leases,
      events: events.slice(0, 50),
    };
  }

  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://bare");
    const caller = await authenticate(req);
    if (!caller) return send(res, 401, { error: "unauthorized" });
    if (req.method === "POST" && url.pathname === "/session.create") {
      const body = JSON.parse(await readBody(req)) as { agentId: string };
      const created = await createSession(caller, body.agentId);
      return created ? send(res, 200, created) : send(res, 404, { error: "agent not found" });
    }
    if (req.method === "GET" && url.pathname === "/workspace.get") {
      const workspace = await getWorkspace(caller, url.searchParams.get("workspaceId") ?? "");
      return workspace ? send(res, 200, workspace) : send(res, 404, { error: "workspace not found" });
    }
    send(res, 404, { error: "no such route" });
  };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(json) });
  res.end(json);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Serves the bare handler on an ephemeral loopback port. */
export async function serveBare(deps: BareDeps, inflight: Inflight): Promise<ServedHandler> {
  const handle = createBareHandler(deps);
  const server = createServer((req, res) => {
    inflight.track(handle(req, res)).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(error));
    });
  });
  return listenOnLoopback(server);
}
