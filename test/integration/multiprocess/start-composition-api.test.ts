/**
 * The HTTP API of the composition `npm start` builds (start-api-process.ts: the services of one copy of
 * Berth's modules, the HTTP entry points of a second copy, as Next's bundle has; X-Forwarded-For set by the
 * server in front, as npm start's), real Postgres, Redis, workers and local (bubblewrap) workspaces:
 * - every audited action records the caller's address (the trusted one) and user agent, whichever copy of
 *   the modules wrote the entry (they were null for everything the composition's services audited);
 * - `workspace.mcp.add` of a stdio server that exits before it answers is a 4xx naming its exit code and
 *   stderr, not retryable, and leaves nothing declared (it was a masked, retryable 503 "Internal error").
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import superjson from "superjson";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createAuth } from "@/server/auth/auth";
import { getDb } from "@/server/db";
import { createInvite, inviteLinkSecret } from "@/server/modules/member/invite.service";
import { TEST_BASE_URL } from "../api/support/api-test-runtime";
import { errorOf, rawTrpcCall } from "../api/support/raw-trpc";
import { createTenantFixture, type TenantFixture } from "../api/support/tenant-fixtures";
import { bundled, startChild, stopChildren, type Child } from "./processes";
import { closeProcessBerth, processBerth } from "@/server/composition/process-berth";

/** The client behind the trusted proxy (loopback): what the audit log must name, not the socket's peer. */
const CLIENT_ADDRESS = "203.0.113.7";
const USER_AGENT = "berth-audit-probe/1.0";

describe("the API as npm start composes it", { timeout: 120_000 }, () => {
  let child: Child | undefined;
  let basedir: string;
  let url: string;
  let a: TenantFixture;
  let failed = false;

  const headers = () => ({
    authorization: `Bearer ${a.adminKey.plainKey}`,
    "user-agent": USER_AGENT,
    "x-forwarded-for": CLIENT_ADDRESS,
  });
  /** A tRPC mutation over HTTP as a client sends it; the answer's data, or its error. */
  const mutate = async (procedure: string, input: Record<string, unknown>) => {
    const answer = await rawTrpcCall(
      url,
      procedure,
      "mutation",
      { tenantId: a.tenant.id, ...input },
      headers(),
    );
    if (answer.status >= 400) return { status: answer.status, error: errorOf(answer) };
    const body = answer.json() as { result: { data: Parameters<typeof superjson.deserialize>[0] } };
    return { status: answer.status, data: superjson.deserialize<Record<string, unknown>>(body.result.data) };
  };

  beforeAll(async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-start-api-")));
    // The sandboxed workspaces' uids must be able to pass through to their folders.
    await fs.chmod(basedir, 0o711);
    const auth = createAuth({
      secret: process.env.BERTH_AUTH_SECRET!,
      baseUrl: TEST_BASE_URL,
      prisma: getDb(),
      log: () => {},
    });
    a = await createTenantFixture({ auth } as Parameters<typeof createTenantFixture>[0], "startapi");
    child = startChild("start-api-process.ts", {
      MP_NEXT_COPY: bundled("next-copy-entry.ts"),
      // Its in-process workers take only its own jobs.
      BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-startapi-${randomBytes(3).toString("hex")}`,
      BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      BERTH_TRUSTED_PROXIES: "127.0.0.1",
      LOG_LEVEL: "warn",
    });
    url = (await child.nextLine((line) => line.startsWith("ready "))).slice("ready ".length);
  }, 120_000);

  afterAll(async () => {
    if (child) await stopChildren([child], failed);
    await closeProcessBerth();
    await fs.rm(basedir, { recursive: true, force: true });
  });

  it("records the caller's address and user agent for every audited action", async () => {
    try {
      const agent = await mutate("agent.create", {
        name: `audited-${randomBytes(3).toString("hex")}`,
        modelConfig: { baseUrl: "http://127.0.0.1:9/v1", model: "none" },
      });
      const agentId = String(agent.data?.id);
      const session = await mutate("session.create", { agentId });
      const { sessionId, workspaceId } = session.data as { sessionId: string; workspaceId: string };
      // Successes and refusals alike are audited; each must name who asked.
      await mutate("chat.cancel", { sessionId });
      await mutate("jobs.retry", { jobId: "no-such-job" });
      await mutate("workspace.mcp.add", {
        workspaceId,
        agentId,
        declaration: {
          name: "quits",
          is_stateful: true,
          mcp_config: { type: "stdio_mcp", command: "/bin/true", args: [] },
        },
      });
      const form = new FormData();
      const skillMd = "---\nname: greet\ndescription: greets people\n---\nSay hi.\n";
      form.append(
        "manifest",
        JSON.stringify({ entries: [{ path: "greet/SKILL.md", size: skillMd.length }] }),
      );
      form.append("files", new Blob([skillMd]), "SKILL.md");
      const upload = await fetch(`${url}/api/workspaces/${workspaceId}/skills?agentId=${agentId}`, {
        method: "POST",
        headers: headers(),
        body: form,
      });
      expect(upload.status, await upload.clone().text()).toBe(201);
      await mutate("workspace.stop", { workspaceId, force: true });
      // A public route with no async context of its own: the server's sets it. (Only people invite.)
      const { token } = await createInvite(
        a.ownerScope,
        { role: "member" },
        inviteLinkSecret(processBerth().config),
        getDb(),
      );
      const accepted = await fetch(`${url}/api/invitations/accept`, {
        method: "POST",
        headers: {
          "user-agent": USER_AGENT,
          "x-forwarded-for": CLIENT_ADDRESS,
          "content-type": "application/json",
        },
        body: JSON.stringify({
          token,
          name: "Invited",
          email: `invited-${randomBytes(3).toString("hex")}@example.test`,
          password: "invited-password-1",
        }),
      });
      expect(accepted.status, await accepted.clone().text()).toBe(200);

      const actions = [
        "agent.create",
        "session.create",
        "chat.cancel",
        "jobs.retry",
        "workspace.mcp.add",
        "workspace.skill.upload",
        "workspace.stop",
        "member.invite-accept",
      ];
      // The audit buffer reaches the table through the child's audit.flush job: wait for every row.
      const rows = await vi.waitFor(
        async () => {
          const found = await getDb().auditLog.findMany({
            where: { tenantId: a.tenant.id, action: { in: actions } },
            select: { action: true, ip: true, userAgent: true },
          });
          expect(found.map((row) => row.action)).toEqual(expect.arrayContaining(actions));
          return found;
        },
        { timeout: 30_000, interval: 100 },
      );
      const seen = Object.fromEntries(
        rows.map((row) => [row.action, { ip: row.ip, userAgent: row.userAgent }]),
      );
      expect(seen).toEqual(
        Object.fromEntries(actions.map((action) => [action, { ip: CLIENT_ADDRESS, userAgent: USER_AGENT }])),
      );
    } catch (error) {
      failed = true;
      throw error;
    }
  });

  it("answers mcp.add of a server that exits with a 4xx naming its exit code and stderr, declaring nothing", async () => {
    try {
      const agent = await mutate("agent.create", {
        name: `exits-${randomBytes(3).toString("hex")}`,
        modelConfig: { baseUrl: "http://127.0.0.1:9/v1", model: "none" },
      });
      const agentId = String(agent.data?.id);
      const { workspaceId } = (await mutate("session.create", { agentId })).data as { workspaceId: string };
      const added = await mutate("workspace.mcp.add", {
        workspaceId,
        agentId,
        declaration: {
          name: "boom",
          is_stateful: true,
          mcp_config: { type: "stdio_mcp", command: "sh", args: ["-c", "echo boom >&2; exit 3"] },
        },
      });
      expect(added.status).toBe(422);
      expect(added.error).toMatchObject({
        data: {
          code: "UNPROCESSABLE_CONTENT",
          retryable: false,
          appError: { code: "UNPROCESSABLE", details: { exitCode: 3, reason: "server_exited" } },
        },
      });
      expect(added.error?.message).toMatch(/exited with code 3.*boom/);
      const listed = await rawTrpcCall(
        url,
        "workspace.mcp.list",
        "query",
        { tenantId: a.tenant.id, workspaceId, agentId },
        headers(),
      );
      expect(listed.status).toBe(200);
      expect(listed.text).not.toContain('"boom"');
    } catch (error) {
      failed = true;
      throw error;
    }
  });
});
