import fs from "node:fs/promises";
import { createServer, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GatewayClient } from "@/server/workspace/gateway/client/gateway-client";
import { HttpGatewayTransport } from "@/server/workspace/gateway/client/gateway-transport";
import { createGatewayServer } from "@/server/workspace/gateway/server/gateway-server";
import { ScopeRegistry } from "@/server/workspace/gateway/server/scope-registry";
import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";
import { everythingMcp } from "./support/mcp-servers";

const TOKEN = "channel-test-token-0123456789abcdef";
const scope = { agentId: "agent", sessionId: "session" };

/**
 * The gateway channel (protocol 3): a real gateway server on a unix socket in front of the real
 * server-everything over stdio. The server counts plain HTTP requests and upgrades, so the tests see which
 * path each request took.
 */
describe("gateway channel: the JSON requests over one upgraded connection", () => {
  let dir: string;
  let gateway: Server;
  let registry: ScopeRegistry;
  let socketPath: string;
  const counts = { http: 0, upgrades: 0 };

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-gw-channel-"));
    registry = new ScopeRegistry(new LocalMcpConnector());
    gateway = createGatewayServer({ token: TOKEN, instanceNonce: "nonce", registry });
    gateway.prependListener("request", () => counts.http++);
    gateway.prependListener("upgrade", () => counts.upgrades++);
    socketPath = path.join(dir, "gw.sock");
    await new Promise<void>((resolve) => gateway.listen(socketPath, resolve));
  });
  afterAll(async () => {
    await registry?.closeAll();
    gateway?.closeAllConnections();
    await new Promise<void>((resolve) => (gateway ? gateway.close(() => resolve()) : resolve()));
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("carries registration, tool calls and errors (with their codes) on one connection", async () => {
    const before = { ...counts };
    const client = new GatewayClient(new HttpGatewayTransport({ socketPath }, TOKEN, { channel: true }));
    expect((await client.health()).protocol).toBe(3);
    await client.addMcp(scope, everythingMcp("everything"));
    const calls = await Promise.all(
      ["a", "b", "c"].map((message) =>
        client.callTool(scope, "everything", "echo", { message }, { timeoutMs: 10_000 }),
      ),
    );
    expect(calls.map((result) => result.content[0])).toEqual(
      ["a", "b", "c"].map((message) => ({ type: "text", text: `Echo: ${message}` })),
    );
    await expect(client.callTool(scope, "missing", "echo", {}, { timeoutMs: 10_000 })).rejects.toMatchObject({
      code: "NOT_FOUND",
      details: { reason: "mcp_not_registered" },
    });
    await client.removeMcp(scope, "everything");
    expect(counts.upgrades - before.upgrades).toBe(1);
    expect(counts.http - before.http).toBe(0);
  });

  it("cancels the upstream call when the host's timeout fires, and the channel keeps working", async () => {
    const client = new GatewayClient(new HttpGatewayTransport({ socketPath }, TOKEN, { channel: true }));
    await client.addMcp(scope, everythingMcp("slow"));
    const args = { duration: 30, steps: 30 };
    await expect(
      client.callTool(scope, "slow", "trigger-long-running-operation", args, { timeoutMs: 300 }),
    ).rejects.toMatchObject({ code: "TIMEOUT" });
    const echoed = await client.callTool(scope, "slow", "echo", { message: "after" }, { timeoutMs: 10_000 });
    expect(echoed.content[0]).toEqual({ type: "text", text: "Echo: after" });
    await client.removeMcp(scope, "slow");
  });

  it("refuses a wrong token at the upgrade: the request is answered 401 as over HTTP", async () => {
    const client = new GatewayClient(
      new HttpGatewayTransport({ socketPath }, "not-the-token-at-all", { channel: true }),
    );
    await expect(client.listMcps(scope)).rejects.toMatchObject({ code: "UNAUTHORIZED" });
  });

  it("uses plain HTTP with a gateway that does not speak the channel", async () => {
    const oldSocket = path.join(dir, "old.sock");
    const seen: string[] = [];
    // What a protocol-2 gateway does with the upgrade: routes it like any request (unknown: 404).
    const old = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      if (req.url === "/channel") res.writeHead(404).end('{"detail":"not found"}');
      else res.writeHead(200, { "content-type": "application/json" }).end("[]");
    });
    await new Promise<void>((resolve) => old.listen(oldSocket, resolve));
    try {
      const client = new GatewayClient(
        new HttpGatewayTransport({ socketPath: oldSocket }, TOKEN, { channel: true }),
      );
      expect(await client.listMcps(scope)).toEqual([]);
      expect(await client.listMcps(scope)).toEqual([]);
      // Asked once, then never again.
      expect(seen.filter((entry) => entry.endsWith("/channel"))).toHaveLength(1);
      expect(seen.filter((entry) => entry.startsWith("GET /mcps"))).toHaveLength(2);
    } finally {
      old.closeAllConnections();
      await new Promise((resolve) => old.close(resolve));
    }
  });
});
