import fs from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { Socket } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AppError } from "@/server/shared/errors";
import { HttpGatewayTransport } from "@/server/workspace/gateway/client/gateway-transport";

const TOKEN = "transport-test-token-0123456789";

/**
 * A gateway stand-in on a real unix socket that records which connection carried each request. With
 * `dropSecondRequestOnConnection`, a connection's second request is met by closing the connection
 * without an answer: what a client sees when a kept-alive connection's gateway went away.
 */
async function startServer(dir: string, options: { dropSecondRequestOnConnection: boolean }) {
  const connections = new Map<Socket, number>();
  const seen: Array<{ method: string; url: string; connection: number; dropped: boolean }> = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    const socket = req.socket;
    if (!connections.has(socket)) connections.set(socket, connections.size + 1);
    const connection = connections.get(socket)!;
    const earlier = seen.filter((entry) => entry.connection === connection).length;
    const dropped = options.dropSecondRequestOnConnection && earlier === 1;
    seen.push({ method: req.method ?? "", url: req.url ?? "", connection, dropped });
    req.resume();
    if (dropped) {
      socket.destroy();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true }));
  });
  const socketPath = path.join(dir, "gw.sock");
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return { server, socketPath, seen };
}

describe("HttpGatewayTransport", () => {
  let dir: string;
  let server: Server | undefined;

  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-gw-transport-"));
  });
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("keeps one connection alive across sequential requests", async () => {
    const started = await startServer(dir, { dropSecondRequestOnConnection: false });
    server = started.server;
    const transport = new HttpGatewayTransport({ socketPath: started.socketPath }, TOKEN);
    for (let i = 0; i < 5; i++) {
      const answer = await transport.request({ method: "GET", path: `/health?i=${i}`, timeoutMs: 5_000 });
      expect(answer.status).toBe(200);
    }
    await transport.request({ method: "POST", path: "/mcps", body: { a: 1 }, timeoutMs: 5_000 });
    expect(new Set(started.seen.map((entry) => entry.connection))).toEqual(new Set([1]));
    expect(started.seen).toHaveLength(6);
  });

  it("sends a GET again on a fresh connection when the kept-alive one turns out dead", async () => {
    const started = await startServer(dir, { dropSecondRequestOnConnection: true });
    server = started.server;
    const transport = new HttpGatewayTransport({ socketPath: started.socketPath }, TOKEN);
    await transport.request({ method: "GET", path: "/health", timeoutMs: 5_000 });
    const answer = await transport.request({ method: "GET", path: "/mcps", timeoutMs: 5_000 });
    expect(answer.status).toBe(200);
    expect(started.seen.map(({ url, connection, dropped }) => ({ url, connection, dropped }))).toEqual([
      { url: "/health", connection: 1, dropped: false },
      { url: "/mcps", connection: 1, dropped: true },
      { url: "/mcps", connection: 2, dropped: false },
    ]);
  });

  it("never repeats a POST (a tool call may have run): it fails UNAVAILABLE instead", async () => {
    const started = await startServer(dir, { dropSecondRequestOnConnection: true });
    server = started.server;
    const transport = new HttpGatewayTransport({ socketPath: started.socketPath }, TOKEN);
    await transport.request({ method: "GET", path: "/health", timeoutMs: 5_000 });
    const call = transport.request({
      method: "POST",
      path: "/mcps/everything/tools/echo",
      body: { arguments: { message: "once" } },
      timeoutMs: 5_000,
    });
    await expect(call).rejects.toSatisfy(
      (error: unknown) => error instanceof AppError && error.code === "UNAVAILABLE",
    );
    expect(started.seen.filter((entry) => entry.method === "POST")).toHaveLength(1);
  });
});
