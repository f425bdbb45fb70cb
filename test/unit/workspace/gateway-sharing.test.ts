import fs from "node:fs/promises";
import type { Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "@/server/shared/errors";
import { GatewayClient } from "@/server/workspace/gateway/client/gateway-client";
import { GatewayConnector } from "@/server/workspace/gateway/client/gateway-connector";
import { HttpGatewayTransport } from "@/server/workspace/gateway/client/gateway-transport";
import { createGatewayServer } from "@/server/workspace/gateway/server/gateway-server";
import { ScopeRegistry } from "@/server/workspace/gateway/server/scope-registry";
import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";
import { McpRegistry } from "@/server/workspace/mcp/mcp-registry";
import { ZMcpDeclaration, type McpScope } from "@/server/workspace/mcp/types";
import { httpMcp, startHttpMcpServer, type TestHttpMcpServer } from "./support/mcp-servers";

const TOKEN = "sharing-test-token-0123456789abcdef";

/**
 * One gateway (in-process, on a real unix socket) in front of a real stateful streamable-HTTP MCP server,
 * reached by several "host processes": each has its own transport, client and connector, as API replicas
 * and workers attached to one sandbox do. The MCP server counts the sessions it opened and closed.
 */
describe("gateway-hosted MCP servers are shared by every host process attached to the sandbox", () => {
  let dir: string;
  let gateway: Server;
  let upstream: TestHttpMcpServer;
  let gatewayRegistry: ScopeRegistry;
  let socketPath: string;
  let scopeCounter = 0;

  const hostProcess = () =>
    new GatewayConnector(new GatewayClient(new HttpGatewayTransport({ socketPath }, TOKEN)));
  const freshScope = (): McpScope => ({ agentId: "agent", sessionId: `s${++scopeCounter}` });
  const textOf = (result: { content: Array<Record<string, unknown>> }) => result.content[0]?.text;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-gw-sharing-"));
    upstream = await startHttpMcpServer();
    gatewayRegistry = new ScopeRegistry(new LocalMcpConnector());
    gateway = createGatewayServer({ token: TOKEN, instanceNonce: "nonce", registry: gatewayRegistry });
    socketPath = path.join(dir, "gw.sock");
    await new Promise<void>((resolve) => gateway.listen(socketPath, resolve));
  });
  afterAll(async () => {
    await gatewayRegistry?.closeAll();
    gateway?.closeAllConnections();
    await new Promise<void>((resolve) => (gateway ? gateway.close(() => resolve()) : resolve()));
    await upstream?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("a second process adopts the running stateful server instead of restarting it", async () => {
    const scope = freshScope();
    const declaration = httpMcp("shared", upstream.url, true);
    const first = await hostProcess().connect(declaration, scope);
    const opened = upstream.sessionsOpened;
    const closed = upstream.sessionsClosed;

    const second = await hostProcess().connect(declaration, scope);
    expect(upstream.sessionsOpened).toBe(opened);
    expect(upstream.sessionsClosed).toBe(closed);
    expect(textOf(await second.callTool("echo", { message: "from two" }))).toBe("Echo: from two");
    expect(textOf(await first.callTool("echo", { message: "from one" }))).toBe("Echo: from one");
    expect(upstream.sessionsOpened).toBe(opened);
  });

  it("a different declaration under the same name replaces the registration", async () => {
    const scope = freshScope();
    await hostProcess().connect(httpMcp("edited", upstream.url, true), scope);
    const opened = upstream.sessionsOpened;
    const closed = upstream.sessionsClosed;

    const edited = ZMcpDeclaration.parse({ ...httpMcp("edited", upstream.url, true), execution_timeout: 12 });
    const client = await hostProcess().connect(edited, scope);
    expect(upstream.sessionsOpened).toBe(opened + 1);
    expect(upstream.sessionsClosed).toBe(closed + 1);
    expect(gatewayRegistry.list(scope)).toEqual([edited]);
    expect(textOf(await client.callTool("echo", { message: "new" }))).toBe("Echo: new");
  });

  it("release leaves the server to the others; close unregisters it, and the others register it again on their next call", async () => {
    const scope = freshScope();
    const declaration = httpMcp("evictable", upstream.url, true);
    const released = await hostProcess().connect(declaration, scope);
    const user = await hostProcess().connect(declaration, scope);
    const closer = await hostProcess().connect(declaration, scope);
    const opened = upstream.sessionsOpened;
    const closed = upstream.sessionsClosed;

    await released.release?.();
    expect(upstream.sessionsClosed).toBe(closed);
    expect(textOf(await user.callTool("echo", { message: "still here" }))).toBe("Echo: still here");
    await expect(released.callTool("echo", { message: "x" })).rejects.toSatisfy(
      (error: unknown) => error instanceof AppError && error.code === "UNAVAILABLE",
    );

    // Another process evicts it (its LRU cap) or resets: the gateway closes the server.
    await closer.close();
    expect(upstream.sessionsClosed).toBe(closed + 1);
    expect(gatewayRegistry.list(scope)).toEqual([]);

    expect(textOf(await user.callTool("echo", { message: "back" }))).toBe("Echo: back");
    expect(upstream.sessionsOpened).toBe(opened + 1);
    expect(gatewayRegistry.list(scope)).toEqual([declaration]);
  });

  it("a workspace closing in one process (releaseAll) keeps the servers; a reset (closeAll) stops them", async () => {
    const scope = freshScope();
    const declaration = httpMcp("workspace-mcp", upstream.url, true);
    const registryIn = () => new McpRegistry({ connector: hostProcess() });
    const processOne = registryIn();
    const processTwo = registryIn();
    await processOne.add(declaration, scope);
    await processTwo.add(declaration, scope);
    const closed = upstream.sessionsClosed;

    await processOne.releaseAll();
    expect(upstream.sessionsClosed).toBe(closed);
    const [client] = await processTwo.list(scope);
    expect(textOf(await client!.callTool("echo", { message: "alive" }))).toBe("Echo: alive");

    await processTwo.closeAll();
    expect(upstream.sessionsClosed).toBe(closed + 1);
    expect(gatewayRegistry.list(scope)).toEqual([]);
  });
});
