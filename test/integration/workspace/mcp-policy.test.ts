/**
 * Who may declare which MCP servers, through the workspace content service on real local workspaces:
 * - stdio servers (a command Berth runs) follow the tenant's policy, owner/admin by default: a member is
 *   refused with a typed FORBIDDEN and the command never runs;
 * - http_mcp/SSE URLs must not reach loopback, link-local or private addresses unless the operator allows
 *   them (BERTH_MCP_ALLOWED_HOSTS), whether written as an address or as a name that resolves to one.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "@/server/shared/errors";
import { changeTenantPolicy } from "@/server/modules/tenant/tenant-policy";
import { addTestMember, createTestTenant, type TestTenant } from "../db/fixtures";
import {
  everythingMcp,
  httpMcp,
  startHttpMcpServer,
  type TestHttpMcpServer,
} from "../../unit/workspace/support/mcp-servers";
import { freshSession, startWorkspaceHarness, type WorkspaceHarness } from "./harness";
import { processBerth } from "@/server/composition/process-berth";

async function appErrorOf(call: Promise<unknown>): Promise<AppError> {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  if (!(error instanceof AppError)) throw new Error(`expected an AppError, got ${String(error)}`);
  return error;
}

const scopeOf = (workspaceId: string) => ({ workspaceId, mcp: { agentId: "", sessionId: "" } });

/** A session of the caller and its workspace, bound and provisioned. */
async function ownWorkspace(harness: WorkspaceHarness, scope: TestTenant["scope"]): Promise<string> {
  const { session, workspaceId } = await freshSession(scope);
  await harness.service.resolveForSession(scope, session.id);
  return workspaceId;
}

describe("MCP declaration policy", () => {
  let h: WorkspaceHarness;
  let allowing: WorkspaceHarness;
  let tenant: TestTenant;
  let member: Awaited<ReturnType<typeof addTestMember>>;
  let memberWorkspace: string;
  let upstream: TestHttpMcpServer;

  beforeAll(async () => {
    h = await startWorkspaceHarness();
    allowing = await startWorkspaceHarness({ mcpAllowedHosts: ["127.0.0.1"] });
    tenant = await createTestTenant();
    member = await addTestMember(tenant, "member");
    memberWorkspace = await ownWorkspace(h, member.scope);
    upstream = await startHttpMcpServer();
  });

  afterAll(async () => {
    await upstream?.close();
    await allowing?.close();
    await h?.close();
  });

  it("refuses a member's stdio MCP with FORBIDDEN before the command runs", async () => {
    const marker = path.join(h.basedir, "stdio-ran");
    const declaration = {
      name: "probe",
      is_stateful: true,
      mcp_config: { type: "stdio_mcp", command: "/bin/sh", args: ["-c", `touch ${marker}; sleep 5`] },
    };
    const { workspaceId, mcp } = scopeOf(memberWorkspace);
    const error = await appErrorOf(h.content().addMcp(member.scope, workspaceId, mcp, declaration));
    expect(error.code).toBe("FORBIDDEN");
    expect(error.details).toMatchObject({ reason: "stdio_mcp_policy", required: "admin" });
    expect(existsSync(marker)).toBe(false);
  });

  it("lets owners declare stdio MCPs, and members once the owner opens the policy to them", async () => {
    const ownerWorkspace = await ownWorkspace(h, tenant.scope);
    await expect(
      h.content().addMcp(tenant.scope, ownerWorkspace, scopeOf("").mcp, everythingMcp("everything")),
    ).resolves.toEqual({ name: "everything" });
    await expect(
      appErrorOf(
        changeTenantPolicy(
          member.scope,
          { stdioMcpMinRole: "member" },
          undefined,
          processBerth().audit,
          processBerth().db,
        ),
      ),
    ).resolves.toMatchObject({ code: "FORBIDDEN" });
    await changeTenantPolicy(
      tenant.scope,
      { stdioMcpMinRole: "member" },
      undefined,
      processBerth().audit,
      processBerth().db,
    );
    try {
      await expect(
        h.content().addMcp(member.scope, memberWorkspace, scopeOf("").mcp, everythingMcp("everything")),
      ).resolves.toEqual({ name: "everything" });
    } finally {
      await changeTenantPolicy(
        tenant.scope,
        { stdioMcpMinRole: "admin" },
        undefined,
        processBerth().audit,
        processBerth().db,
      );
    }
  });

  it("refuses http MCP URLs on loopback, link-local and private addresses, as literals or names", async () => {
    const port = new URL(upstream.url).port;
    const hostile = [
      upstream.url, // 127.0.0.1, with a real MCP server answering there
      `http://localhost:${port}/mcp`, // a name resolving to loopback
      `http://[::1]:${port}/mcp`,
      `http://[::ffff:127.0.0.1]:${port}/mcp`,
      "http://169.254.169.254/latest/meta-data/",
      "http://10.1.2.3/mcp",
      "http://192.168.1.1/sse",
      "http://0.0.0.0:9/mcp",
      // IPv6 forms that carry a non-public IPv4: 6to4, IPv4-compatible, Teredo (server, client), NAT64.
      `http://[2002:7f00:1::]:${port}/mcp`,
      `http://[::127.0.0.1]:${port}/mcp`,
      "http://[2001:0:a00:1::]/mcp",
      `http://[2001:0:5db8:d822:8000:63bf:80ff:fffe]:${port}/mcp`,
      "http://[64:ff9b:1::a9fe:a9fe]/mcp",
    ];
    const { workspaceId, mcp } = scopeOf(memberWorkspace);
    for (const url of hostile) {
      const error = await appErrorOf(
        h.content().addMcp(tenant.scope, workspaceId, mcp, httpMcp("remote", url, false)),
      );
      expect(error.code, url).toBe("FORBIDDEN");
      expect(error.details, url).toMatchObject({ reason: "mcp_host_not_allowed" });
    }
    const listed = await h.content().listMcps(tenant.scope, workspaceId, mcp);
    expect(listed.map((m) => m.name)).not.toContain("remote");
  });

  it("reaches an allowlisted private host", async () => {
    const { workspaceId, mcp } = scopeOf(await ownWorkspace(allowing, tenant.scope));
    await expect(
      allowing.content().addMcp(tenant.scope, workspaceId, mcp, httpMcp("remote", upstream.url, false)),
    ).resolves.toEqual({ name: "remote" });
    const listed = await allowing.content().listMcps(tenant.scope, workspaceId, mcp);
    expect(listed.find((m) => m.name === "remote")).toMatchObject({ isHealthy: true });
  });
});
