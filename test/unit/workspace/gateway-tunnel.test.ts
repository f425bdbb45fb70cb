import fs from "node:fs/promises";
import type { Server } from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GatewayClient } from "@/server/workspace/gateway/client/gateway-client";
import { HttpGatewayTransport } from "@/server/workspace/gateway/client/gateway-transport";
import { openGatewayTunnel } from "@/server/workspace/gateway/client/gateway-tunnel";
import { createGatewayServer } from "@/server/workspace/gateway/server/gateway-server";
import { ScopeRegistry } from "@/server/workspace/gateway/server/scope-registry";
import { LocalMcpConnector } from "@/server/workspace/mcp/local-connector";

const TOKEN = "tunnel-test-token-0123456789abcdef";

/** Everything the peer sent until it ended its side. */
function readAll(stream: Duplex): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    stream.on("data", (chunk: Buffer) => (text += chunk.toString()));
    stream.once("end", () => resolve(text));
    stream.once("error", reject);
  });
}

/**
 * The gateway's TCP tunnel (protocol 4) with real parts: a gateway server on a unix socket and a TCP app on
 * loopback that answers only once the client ended its side (so a half-close must pass through).
 */
describe("gateway tunnel: raw TCP to a loopback port through the gateway", () => {
  let dir: string;
  let gateway: Server;
  let app: net.Server;
  let appPort: number;
  let ownPort: number;
  let socketPath: string;
  let health: ReturnType<GatewayClient["health"]>;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-gw-tunnel-"));
    app = net.createServer({ allowHalfOpen: true }, (socket) => {
      void readAll(socket).then((received) => socket.end(`got:${received}`));
    });
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    appPort = (app.address() as net.AddressInfo).port;
    // A port standing for the gateway's own TCP port (E2B, Kubernetes): never tunnelled to.
    ownPort = appPort + 1;
    gateway = createGatewayServer({
      token: TOKEN,
      instanceNonce: "nonce",
      registry: new ScopeRegistry(new LocalMcpConnector()),
      tunnelRefusedPorts: [ownPort],
    });
    socketPath = path.join(dir, "gw.sock");
    await new Promise<void>((resolve) => gateway.listen(socketPath, resolve));
    health = new GatewayClient(new HttpGatewayTransport({ socketPath }, TOKEN)).health();
  });
  afterAll(async () => {
    gateway?.closeAllConnections();
    await new Promise<void>((resolve) => (gateway ? gateway.close(() => resolve()) : resolve()));
    await new Promise<void>((resolve) => (app ? app.close(() => resolve()) : resolve()));
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("pipes bytes both ways and passes a half-close on", async () => {
    const tunnel = await openGatewayTunnel({ socketPath }, TOKEN, appPort, { health });
    const answer = readAll(tunnel);
    tunnel.write("hello ");
    tunnel.end("world");
    expect(await answer).toBe("got:hello world");
  });

  it("answers typed errors before any upgrade: nothing listening, a refused port, a wrong token", async () => {
    const idle = net.createServer();
    await new Promise<void>((resolve) => idle.listen(0, "127.0.0.1", resolve));
    const idlePort = (idle.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => idle.close(() => resolve()));
    await expect(openGatewayTunnel({ socketPath }, TOKEN, idlePort, { health })).rejects.toMatchObject({
      code: "BAD_GATEWAY",
      userMessage: `Nothing is listening on port ${idlePort} inside the workspace.`,
      details: expect.objectContaining({ reason: "port_not_listening" }) as unknown,
    });
    for (const port of [80, ownPort]) {
      await expect(openGatewayTunnel({ socketPath }, TOKEN, port, { health })).rejects.toMatchObject({
        code: "BAD_REQUEST",
      });
    }
    await expect(openGatewayTunnel({ socketPath }, "wrong", appPort, { health })).rejects.toMatchObject({
      code: "UNAUTHORIZED",
    });
  });
});
