import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { toRouteError } from "@/server/api/error-mapping";
import { assertSameOriginUpgrade } from "@/server/api/request-origin";
import { resolveRequestPrincipal } from "@/server/auth/resolve";
import type { TenantScope } from "@/server/auth/scope";
import type { Berth } from "@/server/composition/berth";
import {
  isPreviewUrl,
  parsePreviewPath,
  SHARE_COOKIE,
  type PreviewRequestPath,
} from "@/server/modules/preview/preview-path";
import { AppError } from "@/server/shared/errors";

export { isPreviewUrl };

/**
 * Preview URLs on Berth's own server (scripts/berth-process.ts): `/p/<workspaceId>/<port>/<rest>`, HTTP and
 * WebSocket, relayed through a fresh tunnel into the workspace's machine per request (WorkspaceMachine.
 * openTunnel: the gateway's unix socket on Docker). Who may: preview.service.ts `authorize` (the session
 * cookie of a member who may read the workspace, or a share link). What the app inside sees: `/<rest>`,
 * Host `127.0.0.1:<port>`, X-Forwarded-*, and none of Berth's cookies or bearer keys; what it answers
 * streams back, minus any cookie that would overwrite Berth's. No lease and no activity: previews are
 * passive (they never keep a workspace from the idle sweep).
 */

/** Berth's cookies (better-auth's, prefix "berth", and the share cookie): never forwarded, never set by an app. */
const BERTH_COOKIE = /^(__Secure-|__Host-)?(berth\.|berth_preview$)/;
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "cookie",
]);

type Authorized = { scope: TenantScope; via: "member" | "share" };

export function createPreviewProxy(berth: Berth) {
  const previews = () => berth.workspaces.previews;
  // Previews are served on their own origin (BERTH_PREVIEW_PORT), never the dashboard's: the app's scripts
  // then cannot read Berth's API (no CORS grant) nor pass its CSRF check with the member's session. The
  // member's session cookie still reaches it (cookies are per host, not per port), which is how a member
  // opens one; writes and upgrades with it must come from the preview origin itself.
  const previewOrigin = berth.config.http.preview?.url ?? null;
  const forwardedProto = new URL(previewOrigin ?? berth.config.http.baseUrl).protocol.replace(":", "");
  const passCookie = (path: PreviewRequestPath, token: string) =>
    `${SHARE_COOKIE}=${token}; Path=${path.cookiePath}; HttpOnly; SameSite=Lax` +
    (forwardedProto === "https" ? "; Secure" : "");

  /** The caller's credentials checked for this preview (the query's share token first, then the cookie). */
  async function authorize(
    req: IncomingMessage,
    path: PreviewRequestPath,
    upgrade: boolean,
  ): Promise<Authorized> {
    const shareToken = path.shareToken ?? cookieOf(req.headers.cookie, SHARE_COOKIE);
    const headers = headersOf(req.headers, { withoutAuthorization: true });
    const principal = await resolveRequestPrincipal(berth.api.auth, headers, berth.db);
    const target = { workspaceId: path.workspaceId, port: path.port };
    const authorized = await previews().authorize(target, { principal, shareToken });
    // A cookie-authenticated upgrade or write from another site is refused (no CORS on WebSockets).
    const unsafe = upgrade || !["GET", "HEAD", "OPTIONS"].includes(req.method ?? "GET");
    if (authorized.via === "member" && unsafe)
      assertSameOriginUpgrade(headers, { allowedOrigins: previewOrigin ? [previewOrigin] : [] });
    return authorized;
  }

  function upstreamHeaders(req: IncomingMessage, path: PreviewRequestPath, keepUpgrade: boolean) {
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined || (HOP_BY_HOP.has(name) && !(keepUpgrade && name === "upgrade"))) continue;
      if (name === "authorization" && /^Bearer\s/i.test(String(value))) continue;
      headers[name] = value;
    }
    const cookies = (req.headers.cookie ?? "")
      .split(";")
      .map((part) => part.trim())
      .filter((part) => part !== "" && !BERTH_COOKIE.test(part.split("=", 1)[0] ?? ""));
    if (cookies.length > 0) headers.cookie = cookies.join("; ");
    headers.host = `127.0.0.1:${path.port}`;
    headers["x-forwarded-for"] = req.headers["x-forwarded-for"] ?? req.socket.remoteAddress ?? "";
    headers["x-forwarded-host"] = req.headers.host ?? "";
    headers["x-forwarded-proto"] = forwardedProto;
    headers["x-forwarded-prefix"] = path.cookiePath.slice(0, -1);
    headers.connection = keepUpgrade ? "Upgrade" : "close";
    return headers;
  }

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = parsePreviewPath(req.url ?? "");
    if (!path) throw new AppError("NOT_FOUND", "not a preview URL", { userMessage: "Preview not found." });
    if (path.needsSlash) {
      const query = (req.url ?? "").includes("?") ? (req.url ?? "").slice((req.url ?? "").indexOf("?")) : "";
      res.writeHead(308, { location: `${path.cookiePath}${query}` }).end();
      return;
    }
    const { scope, via } = await authorize(req, path, false);
    if (path.shareToken !== null && via === "share" && (req.method === "GET" || req.method === "HEAD")) {
      // First use of a share link: the token moves into a cookie for this preview's path only, and the
      // address bar loses it (so it is not copied along, nor sent to the app, nor left in its logs).
      res
        .writeHead(303, {
          location: path.cookiePath + path.upstreamPath.slice(1),
          "set-cookie": passCookie(path, path.shareToken),
          "cache-control": "no-store",
        })
        .end();
      return;
    }
    const tunnel = await previews().openTunnel(scope, { workspaceId: path.workspaceId, port: path.port });
    await relayHttp(req, res, tunnel, path, upstreamHeaders(req, path, false));
  }

  return {
    /** An HTTP request under /p/ (the caller checked `isPreviewUrl`). */
    handleRequest(req: IncomingMessage, res: ServerResponse): void {
      serve(req, res).catch((error: unknown) => answerError(berth, req, res, error));
    },

    /** A WebSocket (any upgrade) under /p/: the upgrade request is forwarded as it came, then bytes are piped. */
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      socket.on("error", () => socket.destroy());
      const path = parsePreviewPath(req.url ?? "");
      const run = async () => {
        if (!path || path.needsSlash) throw new AppError("NOT_FOUND", "not a preview URL");
        const { scope } = await authorize(req, path, true);
        const tunnel = await previews().openTunnel(scope, { workspaceId: path.workspaceId, port: path.port });
        if (socket.destroyed) return void tunnel.destroy();
        const headers = upstreamHeaders(req, path, true);
        const lines = Object.entries(headers).flatMap(([name, value]) =>
          (Array.isArray(value) ? value : [value]).map((item) => `${name}: ${item}`),
        );
        tunnel.write(`${req.method ?? "GET"} ${path.upstreamPath} HTTP/1.1\r\n${lines.join("\r\n")}\r\n\r\n`);
        if (head.length > 0) tunnel.write(head);
        tunnel.on("error", () => socket.destroy());
        socket.on("close", () => tunnel.destroy());
        tunnel.on("close", () => socket.destroy());
        socket.pipe(tunnel);
        tunnel.pipe(socket);
      };
      run().catch((error: unknown) => {
        const { status, text } = errorText(error);
        if (status >= 500) berth.api.logger.warn({ err: error, url: req.url }, "preview upgrade failed");
        socket.end(
          `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? "Error"}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
            `Connection: close\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
        );
      });
    },
  };
}

/** One HTTP/1.1 exchange over the tunnel (Connection: close: the tunnel serves this request only). */
function relayHttp(
  req: IncomingMessage,
  res: ServerResponse,
  tunnel: Duplex,
  path: PreviewRequestPath,
  headers: Record<string, string | string[]>,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const upstream = http.request({
      method: req.method,
      path: path.upstreamPath,
      headers,
      createConnection: () => tunnel,
    });
    upstream.on("response", (answer) => {
      const out: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(answer.headers)) {
        if (value === undefined || (HOP_BY_HOP.has(name) && name !== "host")) continue;
        if (name === "set-cookie") {
          const kept = (value as string[]).filter(
            (c) => !BERTH_COOKIE.test(c.split("=", 1)[0]?.trim() ?? ""),
          );
          if (kept.length > 0) out[name] = kept;
          continue;
        }
        out[name] = value;
      }
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
      answer.pipe(res);
      answer.on("end", () => resolve());
      answer.on("error", () => res.destroy());
    });
    upstream.on("error", (error) => {
      tunnel.destroy();
      if (res.headersSent) res.destroy();
      else
        reject(
          new AppError("BAD_GATEWAY", `preview upstream failed: ${error.message}`, {
            cause: error,
            userMessage: `The app on port ${path.port} closed the connection without answering.`,
          }),
        );
    });
    res.on("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  });
}

function answerError(berth: Berth, req: IncomingMessage, res: ServerResponse, error: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { status, text } = errorText(error);
  if (status >= 500 && status !== 502) berth.api.logger.warn({ err: error, url: req.url }, "preview failed");
  // A browser opening a preview without a session goes to sign-in and comes back.
  const browser = req.method === "GET" && (req.headers.accept ?? "").includes("text/html");
  if (status === 401 && browser) {
    res.writeHead(303, {
      location: `/sign-in?next=${encodeURIComponent(req.url ?? "/")}`,
      "cache-control": "no-store",
    });
    res.end();
    return;
  }
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" });
  res.end(text);
}

/** The status of the one AppError mapping, and its user message as the body (5xx included: ours are safe). */
function errorText(error: unknown): { status: number; text: string } {
  const { status } = toRouteError(error);
  const message = error instanceof AppError ? error.userMessage : "Preview failed.";
  return { status, text: `${message}\n` };
}

function cookieOf(header: string | undefined, name: string): string | null {
  for (const part of (header ?? "").split(";")) {
    const [key, ...value] = part.trim().split("=");
    if (key === name) return value.join("=");
  }
  return null;
}

function headersOf(raw: IncomingHttpHeaders, options: { withoutAuthorization: boolean }): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined || (options.withoutAuthorization && name === "authorization")) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  return headers;
}
