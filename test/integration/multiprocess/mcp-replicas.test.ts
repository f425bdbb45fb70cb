/**
 * Two API processes (web replicas) and a worker process on one workspace, real Postgres and Redis: an MCP
 * server declared through one replica's `workspace.mcp.add` is offered by the other replica, which had
 * loaded the workspace before; a removal through the second is seen by the first. The MCP server is a
 * real streamable-HTTP server run by the test.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import {
  httpMcp,
  startHttpMcpServer,
  type TestHttpMcpServer,
} from "@/test/unit/workspace/support/mcp-servers";
import { createTestTenant } from "../db/fixtures";
import { makeControlDir, readProvisionLog, startChild, stopChildren, type Child } from "./processes";
import type { ReplicaAnswer } from "./replica-process";
import { closeProcessBerth } from "@/server/composition/process-berth";
import { processBerth } from "@/server/composition/process-berth";

type McpListing = Array<{ name: string; tools: Array<{ name: string }> }>;

describe("MCP declarations across API replicas", { timeout: 120_000 }, () => {
  let children: Child[] = [];
  let upstream: TestHttpMcpServer | undefined;
  let basedir: string | undefined;

  afterEach(async (context) => {
    await stopChildren(children, context.task.result?.state === "fail");
    children = [];
    await upstream?.close();
    await closeProcessBerth();
    if (basedir) await fs.rm(basedir, { recursive: true, force: true });
  });

  it("an MCP added through one replica is offered by the other; a removal through that one is seen by the first", async () => {
    basedir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "berth-mp-mcp-")));
    // The sandboxed backend's workspace uids must be able to pass through to their folders.
    await fs.chmod(basedir, 0o711);
    const controlDir = await makeControlDir(basedir);
    upstream = await startHttpMcpServer();
    const tenant = await createTestTenant();
    const workspaceId = `mp-mcp-${randomBytes(4).toString("hex")}`;
    await upsertWorkspaceBinding(
      tenant.scope,
      {
        id: workspaceId,
        backendKind: "local",
        isolationPolicy: "PER_AGENT",
      },
      { config: processBerth().config.quotas },
      processBerth().db,
    );

    const env = {
      BERTH_REDIS_PREFIX: `${process.env.BERTH_REDIS_PREFIX}-mpmcp-${randomBytes(3).toString("hex")}`,
      BERTH_WORKSPACE_BASEDIR: path.join(basedir, "workspaces"),
      // The upstream MCP server listens on loopback, which Berth refuses unless the operator allows it.
      BERTH_MCP_ALLOWED_HOSTS: "127.0.0.1",
      MP_CONTROL_DIR: controlDir,
      MP_USER_ID: tenant.owner.id,
      MP_USER_EMAIL: tenant.owner.email,
      LOG_LEVEL: "silent",
    };
    const worker = startChild("worker-process.ts", env);
    const replicas = [startChild("replica-process.ts", env), startChild("replica-process.ts", env)];
    children.push(worker, ...replicas);
    await Promise.all(children.map((child) => child.nextLine((line) => line === "ready")));

    let nextId = 0;
    const call = async (replica: Child, procedure: string, input: Record<string, unknown>) => {
      const id = ++nextId;
      replica.process.stdin.write(`${JSON.stringify({ id, path: procedure, input })}\n`);
      const line = await replica.nextLine((l) => l.startsWith(`{"id":${id},`));
      const answer = JSON.parse(line) as ReplicaAnswer;
      if (!answer.ok) throw new Error(`${procedure}: ${answer.error.code} ${answer.error.message}`);
      return answer.result;
    };
    const target = { tenantId: tenant.tenantId, workspaceId, agentId: "agent-1", sessionId: "" };
    const list = async (replica: Child) => (await call(replica, "workspace.mcp.list", target)) as McpListing;
    const [first, second] = replicas as [Child, Child];

    // Both replicas load the workspace (the worker provisions it once) before anything is declared.
    expect(await list(first)).toEqual([]);
    expect(await list(second)).toEqual([]);

    await call(first, "workspace.mcp.add", { ...target, declaration: httpMcp("search", upstream.url, true) });
    const seen = await list(second);
    expect(seen.map((mcp) => mcp.name)).toEqual(["search"]);
    expect(seen[0]!.tools.map((tool) => tool.name)).toContain("mcp__search__echo");

    await call(second, "workspace.mcp.remove", { ...target, name: "search" });
    expect(await list(first)).toEqual([]);
    const provisions = await readProvisionLog(controlDir);
    expect(provisions.filter((line) => line.startsWith("done"))).toHaveLength(1);
  });
});
