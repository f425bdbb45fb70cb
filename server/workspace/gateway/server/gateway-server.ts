import { createHash, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type { Duplex } from "node:stream";
import { AppError } from "@/server/shared/errors";
import { CancelSource, type CancelSignal } from "@/server/workspace/mcp/cancel-signal";
import { ZMcpDeclaration, type McpScope } from "@/server/workspace/mcp/types";
import { GATEWAY_PROTOCOL_VERSION, ZGatewayCallToolBody, type TGatewayHealth } from "../gateway-protocol";
import { isChannelUpgrade, serveChannel } from "./gateway-channel-server";
import { isTunnelUpgrade, refuse, serveTunnel, tunnelPort } from "./gateway-tunnel-server";
import type { FileService } from "./file-worker";
import { expectsContinue, sendError, sendJson } from "./http-util";
import type { ScopeRegistry } from "./scope-registry";

export type GatewayServerOptions = {
  token: string;
  instanceNonce: string;
  registry: ScopeRegistry;
  /** Serves `/files/*` (protocol ≥ 2); without it those routes answer 404. */
  files?: FileService;
  /** Request bodies above this are refused with 413 (tool arguments travel in them). */
  maxBodyBytes?: number;
  /** Ports a tunnel may never reach besides those below 1024: the gateway's own TCP port, if it has one. */
  tunnelRefusedPorts?: readonly number[];
};

/**
 * The gateway's HTTP surface (agentscope-spec.md §7.3, with the differences listed in gateway-protocol.ts).
 * Every route requires the bearer token; it is compared in constant time after hashing, so neither the
 * content nor the length of the token leaks through timing.
 */
export function createGatewayServer(options: GatewayServerOptions): http.Server {
  const expectedDigest = digest(`Bearer ${options.token}`);
  const maxBodyBytes = options.maxBodyBytes ?? 32 * 1024 * 1024;
  const authorised = (req: http.IncomingMessage) =>
    timingSafeEqual(digest(req.headers.authorization ?? ""), expectedDigest);

  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (!authorised(req)) {
      // Before any body byte: a client waiting for 100-continue never sends it.
      res.writeHead(401, { "content-type": "text/plain" }).end("invalid gateway token");
      req.resume();
      return;
    }
    if ((req.url ?? "").startsWith("/files/") && options.files) {
      options.files.handle(req, res);
      return;
    }
    if (expectsContinue(req)) res.writeContinue();
    // A host that gives up (timeout, abort) closes the connection: cancel the upstream call too.
    const cancel = new CancelSource();
    res.on("close", () => {
      if (!res.writableFinished) cancel.abort();
    });
    const request = {
      method: req.method ?? "GET",
      url: req.url ?? "/",
      body: () => readJson(req, maxBodyBytes),
    };
    route(request, options, cancel)
      .then((body) => sendJson(res, 200, body))
      .catch((error: unknown) => sendError(res, error));
  };
  const server = http.createServer(handler);
  // Writes ask before sending their body; the token check and the file service decide whether it comes.
  server.on("checkContinue", handler);
  const channels = new Set<Duplex>();
  server.on("upgrade", (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const tunnel = isTunnelUpgrade(req);
    if (!tunnel && !isChannelUpgrade(req)) {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    if (!authorised(req)) {
      socket.end("HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    if (tunnel) {
      socket.on("error", () => socket.destroy());
      let port: number;
      try {
        port = tunnelPort(req.url ?? "", options.tunnelRefusedPorts ?? []);
      } catch (error) {
        refuse(socket, error);
        return;
      }
      serveTunnel(socket, head, port, channels);
      return;
    }
    channels.add(socket);
    socket.once("close", () => channels.delete(socket));
    serveChannel(socket, maxBodyBytes, (request, signal) => route(request, options, signal));
  });
  // Upgraded connections are no longer the server's, so close() would wait for them forever: it drops them.
  const close = server.close.bind(server);
  server.close = (callback) => {
    for (const socket of channels) socket.destroy();
    return close(callback);
  };
  return server;
}

/** A request as `route` needs it, whether it came as HTTP or as a channel frame. */
type GatewayRouteRequest = { method: string; url: string; body: () => Promise<unknown> };

async function route(
  req: GatewayRouteRequest,
  options: GatewayServerOptions,
  signal: CancelSignal,
): Promise<unknown> {
  const { pathname, segments, scope } = parseTarget(req.url);
  const method = req.method;
  const { registry } = options;
  const [root, name, toolsSegment, tool, ...rest] = segments;

  if (root === "health" && segments.length === 1 && method === "GET") {
    const health: TGatewayHealth = {
      status: "ok",
      instance_nonce: options.instanceNonce,
      protocol: GATEWAY_PROTOCOL_VERSION,
      pid: process.pid,
    };
    return health;
  }
  if (root !== "mcps" || rest.length > 0) throw new AppError("NOT_FOUND", "not found");

  if (name === undefined) {
    if (method === "GET") return registry.list(scope);
    if (method === "POST") {
      const parsed = ZMcpDeclaration.safeParse(await req.body());
      if (!parsed.success)
        throw new AppError("BAD_REQUEST", `invalid MCP declaration: ${parsed.error.message}`);
      await registry.add(scope, parsed.data);
      return { ok: true };
    }
  } else if (toolsSegment === undefined) {
    if (method === "DELETE") {
      await registry.remove(scope, name);
      return { ok: true };
    }
  } else if (toolsSegment === "tools") {
    if (tool === undefined && method === "GET") return registry.listTools(scope, name);
    if (tool !== undefined && method === "POST") {
      const parsed = ZGatewayCallToolBody.safeParse(await req.body());
      if (!parsed.success) throw new AppError("BAD_REQUEST", `invalid call body: ${parsed.error.message}`);
      const result = await registry.callTool(scope, name, tool, parsed.data.arguments, {
        timeoutMs: parsed.data.timeout_ms,
        signal,
      });
      return { result };
    }
  }
  throw new AppError("NOT_FOUND", `${method} ${pathname} is not supported`);
}

/**
 * The path's decoded segments and the scope in its query (`agent_id`, `session_id`, form-encoded as the
 * host's URLSearchParams writes them). Parsed by hand: `new URL` plus `searchParams` was a tenth of a
 * relayed call's work in the gateway. Dot segments are not resolved; they name nothing here.
 */
function parseTarget(target: string): { pathname: string; segments: string[]; scope: McpScope } {
  const queryStart = target.indexOf("?");
  const pathname = queryStart === -1 ? target : target.slice(0, queryStart);
  const segments = pathname
    .split("/")
    .filter(Boolean)
    .map((segment) => decodeComponent(segment, "malformed path"));
  let agentId: string | undefined;
  let sessionId: string | undefined;
  const query = queryStart === -1 ? "" : target.slice(queryStart + 1);
  for (const pair of query.split("&")) {
    const equals = pair.indexOf("=");
    const key = equals === -1 ? pair : pair.slice(0, equals);
    if (key !== "agent_id" && key !== "session_id") continue;
    const value = equals === -1 ? "" : decodeComponent(pair.slice(equals + 1), "malformed query");
    // The first occurrence wins, as URLSearchParams.get answers.
    if (key === "agent_id") agentId ??= value;
    else sessionId ??= value;
  }
  return { pathname, segments, scope: { agentId: agentId ?? "", sessionId: sessionId ?? "" } };
}

/** A form-encoded component decoded (`+` is a space); BAD_REQUEST when its escapes are malformed. */
function decodeComponent(text: string, problem: string): string {
  try {
    return decodeURIComponent(text.includes("+") ? text.replaceAll("+", " ") : text);
  } catch {
    throw new AppError("BAD_REQUEST", problem);
  }
}

async function readJson(req: http.IncomingMessage, maxBytes: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > maxBytes) throw new AppError("PAYLOAD_TOO_LARGE", `request body exceeds ${maxBytes} bytes`);
    chunks.push(buffer);
  }
  if (size === 0) return {};
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
  } catch {
    throw new AppError("BAD_REQUEST", "request body is not JSON");
  }
}

function digest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}
