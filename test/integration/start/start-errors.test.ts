/**
 * Engine errors through the real `npm start` process: the composition is loaded through tsx and Next's
 * production bundle carries a second copy of the server modules, so an AppError thrown by the engine is not
 * an instance of the bundle's class. Each refusal below must reach the client as its typed 4xx, not as a
 * 500 "Internal error". The server shares the test's PostgreSQL and Redis (DATABASE_URL, REDIS_URL and the
 * key prefix from the global setup), so the test seeds the tenant, key and workspace directly.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { TRPCClientError } from "@trpc/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBerthClient, type BerthClient } from "@/server/client/create-berth-client";
import { apiKeySecret, createApiKey } from "@/server/modules/api-key/api-key.service";
import { getWorkspace, upsertWorkspaceBinding } from "@/server/modules/workspace/workspace.data";
import { createEnqueue } from "@/server/queue/enqueue";
import { getQueues } from "@/server/queue/queues";
import { findFreePort } from "@/scripts/services/ports";
import { createTestTenant, type TestTenant } from "../db/fixtures";
import { jobOutcome } from "../queue/queue-fixtures";
import { startBerthProcess, waitUntilServing, type StartedBerth } from "./support/start-process";
import { closeProcessBerth, processBerth } from "@/server/composition/process-berth";

/** The tRPC status of a refused call (the client's error carries the server's HTTP status). */
async function refusal(call: Promise<unknown>): Promise<{ status: number | undefined; message: string }> {
  const error = await call.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (!(error instanceof TRPCClientError)) throw new Error(`expected a refusal, got ${String(error)}`);
  const data = error.data as { httpStatus?: number } | undefined;
  return { status: data?.httpStatus, message: error.message };
}

describe("npm start: engine errors reach HTTP clients as their typed 4xx", () => {
  let dataDir: string;
  let url: string;
  let berth: StartedBerth;
  let tenant: TestTenant;
  let apiKey: string;
  let client: BerthClient;
  let workspaceId: string;

  beforeAll(async () => {
    const port = await findFreePort();
    url = `http://127.0.0.1:${port}`;
    dataDir = await mkdtemp(path.join(tmpdir(), "berth-start-errors-"));
    tenant = await createTestTenant();
    apiKey = (
      await createApiKey(
        processBerth().api.auth,
        tenant.scope,
        { name: "start", role: "admin" },
        apiKeySecret(processBerth().config),
        processBerth().db,
      )
    ).plainKey;
    workspaceId = `ws-start-${randomUUID().slice(0, 8)}`;
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

    berth = startBerthProcess({
      via: "npm",
      port,
      env: {
        ...process.env,
        HOST: "127.0.0.1",
        BERTH_BASE_URL: url,
        BERTH_DATA_DIR: dataDir,
        LOG_LEVEL: "warn",
        // The sandboxed backend shows agents only the system and their workspace: the npm MCP server below
        // lives in the repo's node_modules, which the operator exposes read-only.
        BERTH_SANDBOX_READONLY_PATHS: path.resolve("node_modules"),
      },
    });
    await waitUntilServing(berth, url);
    // Provisioned by the server's own workers, as a first chat turn would.
    const job = await createEnqueue(processBerth().queues)("workspace.provision", {
      tenantId: tenant.scope.tenantId,
      workspaceId,
      reason: "start-errors test",
    });
    await jobOutcome(getQueues().get("workspace"), job, 60_000);
    expect((await getWorkspace(tenant.scope, workspaceId, processBerth().db)).state).toBe("READY");
    // In the data folder's own base directory: every npm start of a checkout used to share `.data/workspaces`,
    // and each one's reconcile reaped the others' workspaces as orphans.
    expect(await readdir(path.join(dataDir, "workspaces"))).toContain(tenant.tenantId);
    client = createBerthClient({ url, apiKey });
  }, 900_000);

  afterAll(async () => {
    await berth?.stop();
    await closeProcessBerth();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  const target = () => ({ workspaceId, agentId: "", sessionId: "" });
  const stdio = (name: string, command: string, args: string[] = []) => ({
    name,
    is_stateful: true,
    mcp_config: { type: "stdio_mcp", command, args },
  });

  /** POST a folder upload (the dashboard's multipart shape) to the skill route. */
  async function uploadSkill(files: [string, string][]): Promise<{ status: number; body: unknown }> {
    const form = new FormData();
    form.append(
      "manifest",
      JSON.stringify({
        entries: files.map(([name, body]) => ({ path: name, size: Buffer.byteLength(body) })),
      }),
    );
    for (const [name, body] of files) form.append("files", new Blob([body]), path.posix.basename(name));
    const response = await fetch(`${url}/api/workspaces/${workspaceId}/skills`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, origin: url },
      body: form,
    });
    return { status: response.status, body: await response.json() };
  }

  it("a SKILL.md without front matter is a 4xx that says what is wrong", async () => {
    const answer = await uploadSkill([["broken/SKILL.md", "no front matter here\n"]]);
    expect(answer.status).toBeGreaterThanOrEqual(400);
    expect(answer.status).toBeLessThan(500);
    expect(JSON.stringify(answer.body)).not.toContain("Internal error");
  });

  it("an archive entry the engine refuses (an absolute drive-letter path) is a 400 naming the unsafe entry", async () => {
    const answer = await uploadSkill([["C:/SKILL.md", "---\nname: evil\ndescription: x\n---\n"]]);
    expect(answer).toMatchObject({ status: 400, body: { error: { code: "BAD_REQUEST" } } });
    expect(JSON.stringify(answer.body)).toMatch(/unsafe entry/);
  });

  it("a path-traversal entry is refused with a 4xx before anything is written", async () => {
    const answer = await uploadSkill([
      ["evil/SKILL.md", "---\nname: evil\ndescription: x\n---\n"],
      ["evil/../../escape.txt", "x"],
    ]);
    expect(answer.status).toBeGreaterThanOrEqual(400);
    expect(answer.status).toBeLessThan(500);
  });

  it("removing an unknown skill is a 404", async () => {
    const answer = await refusal(
      client.workspace.skill.remove.mutate({ workspaceId, name: "no-such-skill" }),
    );
    expect(answer.status).toBe(404);
  });

  it("removing an unknown MCP server is a 404", async () => {
    const answer = await refusal(client.workspace.mcp.remove.mutate({ ...target(), name: "no-such-mcp" }));
    expect(answer.status).toBe(404);
  });

  it("adding an MCP server whose command cannot be spawned is a 4xx, and a duplicate name is a 409", async () => {
    const missing = await refusal(
      client.workspace.mcp.add.mutate({
        ...target(),
        declaration: stdio("ghost", "/nonexistent/berth-mcp-server"),
      }),
    );
    expect(missing.status).toBeGreaterThanOrEqual(400);
    expect(missing.status).toBeLessThan(500);
    expect(missing.message).not.toBe("Internal error");

    const everything = path.resolve("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    const declaration = stdio("everything", process.execPath, [everything, "stdio"]);
    await client.workspace.mcp.add.mutate({ ...target(), declaration });
    const duplicate = await refusal(client.workspace.mcp.add.mutate({ ...target(), declaration }));
    expect(duplicate.status).toBe(409);
  });
});
