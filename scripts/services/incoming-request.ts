import type { IncomingMessage, ServerResponse } from "node:http";
import { resolveClientAddress, type TrustedProxies } from "@/server/api/client-address";
import { requestMetaFrom, runWithRequestMeta } from "@/server/shared/request-meta";

/**
 * What `npm start`'s HTTP server does to every request before Next sees it:
 *
 * 1. `X-Forwarded-For` is REPLACED by the one client address Berth trusts (the socket's peer, or the client
 *    a configured proxy forwarded for: server/api/client-address.ts). better-auth's rate limiter, the sign-in
 *    guard and the audit log read that header, so a client can no longer choose its own address.
 * 2. A request whose body was not read to the end when its response finished (an early 401/403/413 from the
 *    upload route) has the rest drained, so the next request on that keep-alive connection is parsed from
 *    the right byte; a remainder too large to be worth reading closes the connection instead of leaving it
 *    stuck mid-body.
 */
export const MAX_DRAIN_BYTES = 4 * 1024 * 1024;

export function prepareIncomingRequest(
  req: IncomingMessage,
  res: ServerResponse,
  proxies: TrustedProxies,
): void {
  const client = resolveClientAddress(req.socket.remoteAddress, req.headers["x-forwarded-for"], proxies);
  if (client) req.headers["x-forwarded-for"] = client;
  else delete req.headers["x-forwarded-for"];
  res.once("finish", () => settleUnreadBody(req));
}

/**
 * One request as `npm start`'s HTTP server serves it: prepared (above), then `serve` runs inside the
 * request's async context (server/shared/request-meta.ts) holding that trusted address and the user agent.
 * Set here, once, every audit entry written while the request is served names its caller, whichever route
 * handler, procedure or service writes it (the tRPC handler and the upload routes also set it themselves,
 * for hosts other than this server).
 */
export function serveIncomingRequest(
  req: IncomingMessage,
  res: ServerResponse,
  proxies: TrustedProxies,
  serve: () => void,
): void {
  prepareIncomingRequest(req, res, proxies);
  const forwardedFor = req.headers["x-forwarded-for"];
  runWithRequestMeta(
    requestMetaFrom(typeof forwardedFor === "string" ? forwardedFor : null, req.headers["user-agent"]),
    serve,
  );
}

function settleUnreadBody(req: IncomingMessage): void {
  if (req.complete) return;
  const socket = req.socket;
  const declared = Number(req.headers["content-length"] ?? Number.NaN);
  if (req.destroyed || (Number.isFinite(declared) && declared > MAX_DRAIN_BYTES)) {
    socket.destroySoon(); // after the response is flushed: the client reads it, then sees the close
    return;
  }
  let drained = 0;
  req.on("data", (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > MAX_DRAIN_BYTES) socket.destroySoon();
  });
  req.once("error", () => socket.destroy());
  req.resume();
}
