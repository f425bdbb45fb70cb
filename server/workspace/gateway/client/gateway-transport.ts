import http from "node:http";
import type { Readable } from "node:stream";
import { AppError, isAppError } from "@/server/shared/errors";
import { GatewayChannel } from "./gateway-channel";
import type { GatewayEndpoint, GatewayRequest, GatewayResponse } from "./gateway-wire";

/**
 * How requests travel to a gateway. Docker uses HTTP over the bind-mounted unix socket; E2B and
 * Kubernetes can plug in their own (a port-forward, or an exec'd relay as in the reference).
 */
export interface GatewayTransport {
  request(request: GatewayRequest): Promise<GatewayResponse>;
}

/** A request whose body and answer are streams (file transfers). */
export type GatewayStreamRequest = {
  method: "GET" | "POST" | "PUT";
  path: string;
  /**
   * Sent only once the gateway answered `100 Continue`: a request it refuses (bad token, file service down,
   * unwritable path) consumes none of it, so the caller can still send it elsewhere.
   */
  body?: Readable;
  /** Bound on getting the answer's headers, or the 100-continue when there is a body (uploads are unbounded). */
  timeoutMs: number;
};

export type GatewayStreamResponse = { status: number; body: http.IncomingMessage };

/** Answers above this size are refused: tool results are JSON, not file transfers. */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/**
 * Plain node:http to a socket path or host:port, with the bearer token on every request. Connections are
 * kept alive between requests: setting one up is half of a small request's round trip (a tool call is
 * ~0.2 ms faster). Idle connections close themselves shortly before the gateway's keep-alive timeout (Node
 * honours the server's `Keep-Alive: timeout` hint), and they do not keep the host process alive.
 */
export class HttpGatewayTransport implements GatewayTransport {
  private readonly agent = new http.Agent({ keepAlive: true, maxFreeSockets: 4 });
  private readonly channel: GatewayChannel | null;

  /**
   * `channel`: send the JSON requests over the gateway channel (gateway-channel.ts) when the gateway
   * speaks it, plain HTTP otherwise. For endpoints reached directly (a unix socket); a proxy in between
   * may not pass an upgraded connection on.
   */
  constructor(
    private readonly endpoint: GatewayEndpoint,
    private readonly token: string,
    options: { channel?: boolean } = {},
  ) {
    this.channel = options.channel ? new GatewayChannel(endpoint, token) : null;
  }

  async request(request: GatewayRequest): Promise<GatewayResponse> {
    const answered = this.channel ? await this.channel.request(request) : null;
    return answered ?? this.send(request, this.agent);
  }

  /**
   * A reused connection can turn out to be dead when its request is written (the gateway was restarted,
   * or closed it as idle at that moment). A GET is then sent once more on a fresh connection; other
   * methods are not, since the gateway may have acted on them: they fail UNAVAILABLE, as a request to a
   * gateway that went away mid-call does.
   */
  private async send(request: GatewayRequest, agent: http.Agent | false): Promise<GatewayResponse> {
    try {
      return await this.exchange(request, agent);
    } catch (error) {
      if (agent && request.method === "GET" && isDeadReusedConnection(error)) {
        return this.exchange(request, false);
      }
      throw error;
    }
  }

  private exchange(request: GatewayRequest, agent: http.Agent | false): Promise<GatewayResponse> {
    const payload =
      request.body === undefined ? undefined : Buffer.from(JSON.stringify(request.body), "utf8");
    return new Promise<GatewayResponse>((resolve, reject) => {
      if (request.signal?.aborted) {
        reject(new AppError("TIMEOUT", "gateway request aborted before it started"));
        return;
      }
      const req = http.request({
        ...this.endpoint,
        method: request.method,
        path: request.path,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(payload ? { "content-type": "application/json", "content-length": payload.length } : {}),
        },
        agent,
      });
      const timer = setTimeout(() => {
        req.destroy(
          new AppError("TIMEOUT", `gateway ${request.method} ${pathOnly(request.path)} timed out`, {
            details: { timeoutMs: request.timeoutMs },
          }),
        );
      }, request.timeoutMs);
      const onAbort = () => req.destroy(new AppError("TIMEOUT", "gateway request aborted"));
      request.signal?.addEventListener("abort", onAbort, { once: true });
      const finish = () => {
        clearTimeout(timer);
        request.signal?.removeEventListener("abort", onAbort);
      };
      req.on("error", (error) => {
        finish();
        reject(isAppError(error) ? error : toTransportError(error, request, req.reusedSocket));
      });
      collectGatewayResponse(req, (response) => {
        finish();
        resolve(response);
      });
      req.end(payload);
    });
  }
}

/**
 * One streamed exchange over the same endpoint and token as HttpGatewayTransport. Resolves with the answer
 * as a stream (the caller reads it with backpressure). Rejections are AppErrors whose details say whether
 * any byte of the body left (`bodyStarted`): only when none did can the request safely be sent elsewhere.
 */
/**
 * Collects a gateway answer whole (at most 64 MiB: more destroys the request with PAYLOAD_TOO_LARGE) and
 * hands it to `done`. Errors surface through the request's own error handler. Shared by every transport
 * that speaks the gateway protocol over node:http (unix socket, TCP, the E2B sandbox's exposed port).
 */
export function collectGatewayResponse(
  req: http.ClientRequest,
  done: (response: GatewayResponse) => void,
): void {
  req.on("response", (res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_RESPONSE_BYTES) {
        req.destroy(new AppError("PAYLOAD_TOO_LARGE", "gateway response exceeds 64 MiB"));
        return;
      }
      chunks.push(chunk);
    });
    res.on("end", () => done({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
    res.on("error", () => undefined); // surfaced through req's error handler
  });
}

export function openGatewayStream(
  endpoint: GatewayEndpoint,
  token: string,
  request: GatewayStreamRequest,
): Promise<GatewayStreamResponse> {
  const { body } = request;
  return new Promise<GatewayStreamResponse>((resolve, reject) => {
    const req = http.request({
      ...endpoint,
      method: request.method,
      path: request.path,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body
          ? {
              expect: "100-continue",
              "content-type": "application/octet-stream",
              "transfer-encoding": "chunked",
            }
          : {}),
      },
      // Transfers get a connection of their own: one cut off midway is destroyed anyway, a refused upload
      // must not leave a half-used connection behind, and a file round trip is ~10 ms, not the ~0.2 ms a
      // kept-alive connection saves.
      agent: false,
    });
    let bodyStarted = false;
    let answered = false;
    const timer = setTimeout(() => {
      req.destroy(
        new AppError("TIMEOUT", `gateway ${request.method} ${pathOnly(request.path)} timed out`, {
          details: { timeoutMs: request.timeoutMs },
        }),
      );
    }, request.timeoutMs);
    req.on("continue", () => {
      if (!body || bodyStarted) return;
      clearTimeout(timer);
      bodyStarted = true;
      // A failing source aborts the upload; the gateway then discards its temporary file.
      body.once("error", (error) => req.destroy(error));
      body.pipe(req);
    });
    req.on("response", (res) => {
      clearTimeout(timer);
      answered = true;
      if (body) {
        // An answer before the body was all sent (a refusal, or a write failing midway): stop sending.
        res.once("end", () => {
          if (!req.writableFinished) {
            body.unpipe(req);
            req.destroy();
          }
        });
      }
      resolve({ status: res.statusCode ?? 0, body: res });
    });
    req.on("error", (error) => {
      clearTimeout(timer);
      if (answered) return; // surfaced through the answer stream
      const appError = isAppError(error) ? error : toTransportError(error, request);
      reject(
        new AppError(appError.code, appError.message, {
          cause: appError.cause ?? error,
          userMessage: appError.userMessage,
          details: { ...appError.details, bodyStarted },
        }),
      );
    });
    if (body) req.flushHeaders();
    else req.end();
  });
}

function toTransportError(
  error: Error,
  request: { method: string; path: string },
  reusedConnection = false,
): AppError {
  const code = (error as NodeJS.ErrnoException).code;
  const unreachable =
    code === "ENOENT" || code === "ECONNREFUSED" || code === "ECONNRESET" || code === "EPIPE";
  return new AppError(
    unreachable ? "UNAVAILABLE" : "INTERNAL",
    `gateway ${request.method} ${pathOnly(request.path)} failed: ${error.message}`,
    {
      cause: error,
      details: { errno: code, ...(reusedConnection ? { reusedConnection } : {}) },
      userMessage: "The workspace's MCP gateway is not reachable",
    },
  );
}

function isDeadReusedConnection(error: unknown): boolean {
  if (!isAppError(error) || error.details?.reusedConnection !== true) return false;
  const errno = error.details.errno;
  return errno === "ECONNRESET" || errno === "EPIPE";
}

function pathOnly(path: string): string {
  return path.split("?")[0] ?? path;
}
