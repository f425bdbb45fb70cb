import fs from "node:fs/promises";
import { createServer, type Server } from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { GatewayClient } from "@/server/workspace/gateway/client/gateway-client";
import { HttpGatewayTransport } from "@/server/workspace/gateway/client/gateway-transport";
import { CHANNEL_PROTOCOL } from "@/server/workspace/gateway/channel-framing";
import { GATEWAY_PROTOCOL_VERSION } from "@/server/workspace/gateway/gateway-protocol";
import { serveChannel } from "@/server/workspace/gateway/server/gateway-channel-server";
import { createGatewayServer } from "@/server/workspace/gateway/server/gateway-server";
import type { CancelSignal } from "@/server/workspace/mcp/cancel-signal";
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
    expect((await client.health()).protocol).toBe(GATEWAY_PROTOCOL_VERSION);
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

  it("reads the scope as the host's client encodes it, reserved characters included", async () => {
    const client = new GatewayClient(new HttpGatewayTransport({ socketPath }, TOKEN, { channel: true }));
    const odd = { agentId: "a b+c&d=e", sessionId: "s/é?%20#" };
    await client.addMcp(odd, everythingMcp("odd"));
    try {
      expect((await client.listMcps(odd)).map((declaration) => declaration.name)).toEqual(["odd"]);
      expect(await client.listMcps({ agentId: "a b c&d=e", sessionId: odd.sessionId })).toEqual([]);
    } finally {
      await client.removeMcp(odd, "odd");
    }
  });

  it("answers a malformed escape in the path or the scope 400, over the channel and over HTTP", async () => {
    for (const channel of [true, false]) {
      const transport = new HttpGatewayTransport({ socketPath }, TOKEN, { channel });
      for (const target of ["/mcps/%zz/tools", "/mcps?agent_id=%E0%A4%A&session_id=s"]) {
        const response = await transport.request({ method: "GET", path: target, timeoutMs: 5_000 });
        expect(response.status).toBe(400);
        expect(JSON.parse(response.body.toString("utf8"))).toMatchObject({ code: "BAD_REQUEST" });
      }
    }
  });
});

describe("gateway channel: cancelling the calls it runs", () => {
  it("a CANCEL line aborts its request's call; the connection closing aborts the others", async () => {
    const signals = new Map<string, CancelSignal>();
    const aborted: string[] = [];
    const server = net.createServer((socket) =>
      serveChannel(socket, 1024, (request, signal) => {
        signals.set(request.url, signal);
        return new Promise((_resolve, reject) =>
          signal.addEventListener("abort", () => {
            aborted.push(request.url);
            reject(new Error("aborted"));
          }),
        );
      }),
    );
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-gw-cancel-"));
    const socketPath = path.join(dir, "cancel.sock");
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    try {
      const socket = net.connect(socketPath);
      let received = "";
      socket.on("data", (chunk: Buffer) => (received += chunk.toString("utf8")));
      await vi.waitFor(() => expect(received).toContain(`Upgrade: ${CHANNEL_PROTOCOL}`));
      socket.write("1 POST /first {}\n2 POST /second {}\n");
      await vi.waitFor(() => expect([...signals.keys()]).toEqual(["/first", "/second"]));
      socket.write("1 CANCEL\n");
      await vi.waitFor(() => expect(aborted).toEqual(["/first"]));
      expect(signals.get("/second")?.aborted).toBe(false);
      socket.destroy();
      await vi.waitFor(() => expect(aborted).toEqual(["/first", "/second"]));
    } finally {
      await new Promise((resolve) => server.close(resolve));
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
