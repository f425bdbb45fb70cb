import http from "node:http";
import path from "node:path";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { DockerWorkspaceHandle } from "@/server/workspace/drivers/docker/docker-containers";
import { GatewayClient } from "@/server/workspace/gateway/client/gateway-client";
import { HttpGatewayTransport } from "@/server/workspace/gateway/client/gateway-transport";
import { ZMcpDeclaration, type LiveMcpClient, type TMcpDeclaration } from "@/server/workspace/mcp/types";
import { copyPackageClosure, createDockerTestbed, describeDocker } from "./support/docker-env";

const EVERYTHING = "@modelcontextprotocol/server-everything";

describeDocker("MCP gateway inside a Docker workspace, reached over the bind-mounted unix socket", () => {
  let testbed: Awaited<ReturnType<typeof createDockerTestbed>>;
  let ws: DockerWorkspaceHandle;
  let serverScript: string;
  const clients: LiveMcpClient[] = [];

  const everything = (overrides: Partial<TMcpDeclaration> = {}): TMcpDeclaration =>
    ZMcpDeclaration.parse({
      name: "everything",
      is_stateful: true,
      mcp_config: { type: "stdio_mcp", command: "node", args: [serverScript, "stdio"] },
      ...overrides,
    });

  const connect = async (declaration: TMcpDeclaration, agentId: string, sessionId: string) => {
    const client = await ws.mcpConnector.connect(declaration, { agentId, sessionId });
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    testbed = await createDockerTestbed();
    ws = await testbed.open(testbed.newContainers());
    // The real npm package and its dependency closure, copied into the workdir: the container has no network.
    const packageDir = await copyPackageClosure(EVERYTHING, path.join(ws.hostWorkdir, ".fixtures"));
    serverScript = path.posix.join("/workspace", path.relative(ws.hostWorkdir, packageDir), "dist/index.js");
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close()));
    await testbed?.cleanup();
  });

  it("is READY only with a healthy gateway answering this instance's nonce", async () => {
    const health = await ws.gateway.client.health();
    expect(health.instance_nonce).toBe(ws.gateway.instanceNonce);
    expect(ws.gateway.socketPath.startsWith(testbed.config.runtimeRoot!)).toBe(true);
  });

  it("runs a real stdio MCP server from npm inside the container and calls it from the host", async () => {
    const client = await connect(everything(), "agent-1", "session-1");
    const tools = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(["echo", "get-sum"]));
    const echoed = await client.callTool("echo", { message: "through the gateway" });
    expect(echoed).toMatchObject({
      isError: false,
      content: [{ type: "text", text: "Echo: through the gateway" }],
    });
    const sum = await client.callTool("get-sum", { a: 2, b: 40 });
    expect(JSON.stringify(sum.content)).toContain("42");

    // The server runs as the workspace user inside the container, the gateway as root.
    const ps = await ws.backend.exec(["ps", "-eo", "user:12,args"]);
    const lines = ps.stdout.toString().split("\n");
    expect(lines.find((line) => line.includes("server-everything"))).toMatch(/^berth\s/);
    expect(lines.find((line) => line.includes("berth-gateway.cjs"))).toMatch(/^root\s/);
  });

  it("keeps two sessions of a stateful server apart", async () => {
    const a = await connect(everything(), "agent-1", "session-a");
    const b = await connect(everything(), "agent-1", "session-b");
    const text = async (client: LiveMcpClient) =>
      JSON.stringify((await client.callTool("toggle-simulated-logging", {})).content);
    expect(await text(a)).toContain("Started");
    // A shared upstream session would report "Stopped" here.
    expect(await text(b)).toContain("Started");
    expect(await text(a)).toContain("Stopped");
    expect(await text(b)).toContain("Stopped");
    const listed = await ws.gateway.client.listMcps({ agentId: "agent-1", sessionId: "session-a" });
    expect(listed.map((declaration) => declaration.name)).toEqual(["everything"]);
    await a.close();
    expect(await ws.gateway.client.listMcps({ agentId: "agent-1", sessionId: "session-a" })).toEqual([]);
    expect(await text(b)).toContain("Started");
  });

  it("refuses a wrong or missing token with 401, and keeps the token out of the agent's reach", async () => {
    const wrong = new GatewayClient(
      new HttpGatewayTransport({ socketPath: ws.gateway.socketPath }, "not-the-token-at-all"),
    );
    await expect(wrong.listMcps({ agentId: "", sessionId: "" })).rejects.toMatchObject({
      code: "UNAUTHORIZED",
    });
    await expect(wrong.health()).rejects.toMatchObject({ code: "UNAUTHORIZED" });
    const status = await new Promise<number>((resolve, reject) => {
      http
        .get({ socketPath: ws.gateway.socketPath, path: "/mcps" }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
        .on("error", reject);
    });
    expect(status).toBe(401);

    const pid = (await ws.gateway.client.health()).pid;
    const environ = await ws.backend.exec(["cat", `/proc/${pid}/environ`]);
    expect(environ.exitCode).not.toBe(0);
    expect(environ.stdout.toString()).not.toContain("BERTH_GATEWAY_TOKEN");
    const args = await ws.backend.exec(["cat", `/proc/${pid}/cmdline`]);
    expect(args.stdout.toString()).not.toMatch(/token/i);
    // The socket directory is not the agent's: it cannot plant a fake gateway there.
    const plant = await ws.backend.exec(["touch", "/run/berth/fake.sock"]);
    expect(plant.exitCode).not.toBe(0);
  });

  it("applies per-call timeouts (configurable, not a hard 30 s ceiling) and URL-encodes names", async () => {
    const client = await connect(everything(), "agent-2", "");
    await expect(
      client.callTool("trigger-long-running-operation", { duration: 3, steps: 3 }, { timeoutMs: 800 }),
    ).rejects.toMatchObject({ code: "TIMEOUT" });
    const slow = await client.callTool(
      "trigger-long-running-operation",
      { duration: 1, steps: 2 },
      { timeoutMs: 20_000 },
    );
    expect(JSON.stringify(slow.content)).toContain("completed");
    // A tool name full of URL syntax reaches the server intact (the reference formatted it into the path raw).
    const odd = await client.callTool("we?ird/na me#x", {});
    expect(odd.isError).toBe(true);
    expect(JSON.stringify(odd.content)).toContain("we?ird/na me#x");
  });

  it("hides disabled tools and refuses to call them, like the local connector", async () => {
    const client = await connect(everything({ name: "limited", disable_tools: ["get-sum"] }), "agent-3", "s");
    expect((await client.listTools()).map((tool) => tool.name)).not.toContain("get-sum");
    await expect(client.callTool("get-sum", { a: 1, b: 2 })).rejects.toMatchObject({ code: "FORBIDDEN" });
  });

  it("unregisters a stateless HTTP MCP on close, so the same name can be added again", async () => {
    // server-everything's streamable HTTP mode, on the container's loopback (network mode none still has lo).
    // It calls the global `crypto`, which Debian's Node 18 only exposes behind this flag.
    await ws.backend.exec([
      "sh",
      "-c",
      `PORT=3101 nohup node --experimental-global-webcrypto ${serverScript} streamableHttp > /tmp/http-mcp.log 2>&1 &`,
    ]);
    const declaration = ZMcpDeclaration.parse({
      name: "remote",
      is_stateful: false,
      mcp_config: { type: "http_mcp", url: "http://127.0.0.1:3101/mcp" },
    });
    const scope = { agentId: "agent-4", sessionId: "s" };
    const first = await vi.waitFor(() => ws.mcpConnector.connect(declaration, scope), {
      timeout: 20_000,
      interval: 200,
    });
    expect(await first.callTool("echo", { message: "stateless" })).toMatchObject({
      content: [{ type: "text", text: "Echo: stateless" }],
    });
    await first.close();
    expect(await ws.gateway.client.listMcps(scope)).toEqual([]);
    const again = await connect(declaration, scope.agentId, scope.sessionId);
    expect((await again.listTools()).length).toBeGreaterThan(0);
  });
});
