import type http from "node:http";
import net from "node:net";
import type { Duplex } from "node:stream";
import { AppError } from "@/server/shared/errors";
import {
  MAX_TUNNEL_PORT,
  MIN_TUNNEL_PORT,
  PORT_NOT_LISTENING,
  TUNNEL_PATH,
  TUNNEL_PROTOCOL,
} from "../gateway-protocol";
import { errorAnswer } from "./http-util";

/** How long the gateway waits for 127.0.0.1:N to accept before it answers 504. */
const CONNECT_TIMEOUT_MS = 10_000;

/** True for `GET /tunnel?port=N` asking to switch to the TCP tunnel (gateway-protocol.ts, protocol ≥ 4). */
export function isTunnelUpgrade(req: http.IncomingMessage): boolean {
  const url = req.url ?? "";
  return (
    req.method === "GET" &&
    (url === TUNNEL_PATH || url.startsWith(`${TUNNEL_PATH}?`)) &&
    (req.headers.upgrade ?? "").toLowerCase() === TUNNEL_PROTOCOL
  );
}

/**
 * The port a tunnel request names, or BAD_REQUEST: an integer in 1024–65535 and not one of `refused` (the
 * gateway's own TCP port: a tunnel to it would hand the bearer-token-guarded surface to whoever holds a
 * preview URL).
 */
export function tunnelPort(url: string, refused: readonly number[]): number {
  const query = new URLSearchParams(url.slice(url.indexOf("?") + 1));
  const raw = query.get("port") ?? "";
  const port = /^\d{1,5}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(port) || port < MIN_TUNNEL_PORT || port > MAX_TUNNEL_PORT || refused.includes(port)) {
    throw new AppError("BAD_REQUEST", `tunnel port ${raw || "(none)"} is not allowed`, {
      details: { port: raw },
    });
  }
  return port;
}

/**
 * Connects to 127.0.0.1:`port` inside the machine, then answers the upgrade and pipes raw bytes both ways
 * until both directions ended. An answer before the 101 is a plain HTTP error with the gateway's error
 * body: 502 `port_not_listening` (refused), 504 (no accept within 10 s), 502 for anything else.
 * Half-close: `allowHalfOpen` on both sockets and `pipe` (which ends the writer when the reader ends) pass
 * a FIN on without closing the other direction; an error on either side destroys both.
 */
export function serveTunnel(socket: Duplex, head: Buffer, port: number, tunnels: Set<Duplex>): void {
  const upstream = net.connect({ host: "127.0.0.1", port, allowHalfOpen: true });
  let connected = false;
  const timer = setTimeout(() => upstream.destroy(timeoutError(port)), CONNECT_TIMEOUT_MS);
  socket.on("error", () => upstream.destroy());
  upstream.once("error", (error: NodeJS.ErrnoException) => {
    clearTimeout(timer);
    if (connected) socket.destroy();
    else refuse(socket, connectError(error, port));
  });
  upstream.once("connect", () => {
    clearTimeout(timer);
    if (socket.destroyed) {
      upstream.destroy();
      return;
    }
    connected = true;
    tunnels.add(socket);
    socket.once("close", () => {
      tunnels.delete(socket);
      upstream.destroy();
    });
    // Upstream gone: ending our half lets what was written drain; the host's FIN then closes the socket.
    upstream.once("close", () => {
      if (!socket.writableEnded) socket.end();
    });
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${TUNNEL_PROTOCOL}\r\nConnection: Upgrade\r\n\r\n`,
    );
    if (head.length > 0) upstream.write(head);
    socket.pipe(upstream);
    upstream.pipe(socket);
  });
}

/** An error answer on the raw socket, before any upgrade. */
export function refuse(socket: Duplex, error: unknown): void {
  const [status, body] = errorAnswer(error);
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} Tunnel Refused\r\nContent-Type: application/json\r\nConnection: close\r\n` +
      `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
  );
}

function connectError(error: NodeJS.ErrnoException, port: number): AppError {
  if (error instanceof AppError) return error;
  const refused = error.code === "ECONNREFUSED";
  return new AppError("BAD_GATEWAY", `connecting to port ${port} failed: ${error.code ?? error.message}`, {
    userMessage: refused
      ? `Nothing is listening on port ${port} inside the workspace.`
      : `Port ${port} inside the workspace could not be reached.`,
    details: { port, errno: error.code, ...(refused ? { reason: PORT_NOT_LISTENING } : {}) },
  });
}

function timeoutError(port: number): AppError {
  return new AppError("TIMEOUT", `port ${port} did not accept within ${CONNECT_TIMEOUT_MS} ms`, {
    userMessage: `Port ${port} inside the workspace did not answer.`,
    details: { port },
  });
}
