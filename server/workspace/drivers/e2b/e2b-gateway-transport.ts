import http from "node:http";
import https from "node:https";
import { AppError, isAppError } from "@/server/shared/errors";
import {
  collectGatewayResponse,
  type GatewayTransport,
} from "@/server/workspace/gateway/client/gateway-transport";
import type { GatewayRequest, GatewayResponse } from "@/server/workspace/gateway/client/gateway-wire";

/**
 * Where a sandbox port is reached from the host: the name `sandbox.getHost(port)` gives (sent as the Host,
 * which is how E2B's edge routes `<port>-<id>.<domain>`), over HTTPS to that name, or, with a self-hosted or
 * emulated E2B (`sandboxUrl` set), to that URL. The traffic token is required because sandboxes are
 * created with `allowPublicTraffic: false`.
 */
export type SandboxPortEndpoint = {
  /** The `getHost(port)` name. */
  host: string;
  /** Where the TCP/TLS connection goes; the Host header stays `host`. */
  connectTo: URL;
  trafficAccessToken: string | undefined;
};

export function portEndpoint(
  sandbox: { getHost(port: number): string; trafficAccessToken?: string | undefined },
  port: number,
  sandboxUrl: string | undefined,
): SandboxPortEndpoint {
  const host = sandbox.getHost(port);
  return {
    host,
    connectTo: new URL(sandboxUrl ?? `https://${host}`),
    trafficAccessToken: sandbox.trafficAccessToken,
  };
}

/**
 * The gateway's wire (gateway-protocol.ts) over a sandbox's exposed port, with the bearer token on every
 * request. Connections are kept alive; a dead reused connection is retried for GETs only (the gateway may
 * have acted on anything else), as the unix-socket transport does. A body is written with the headers in
 * one piece, so a server that answers as soon as it has the body never races a separate end-of-request.
 */
export class E2bGatewayTransport implements GatewayTransport {
  private readonly agent: http.Agent;
  private readonly module: typeof http | typeof https;

  constructor(
    private readonly endpoint: SandboxPortEndpoint,
    private readonly token: string,
  ) {
    const secure = endpoint.connectTo.protocol === "https:";
    this.module = secure ? https : http;
    this.agent = secure
      ? new https.Agent({ keepAlive: true, maxFreeSockets: 4, servername: endpoint.host })
      : new http.Agent({ keepAlive: true, maxFreeSockets: 4 });
  }

  async request(request: GatewayRequest): Promise<GatewayResponse> {
    try {
      return await this.exchange(request, this.agent);
    } catch (error) {
      if (request.method === "GET" && isAppError(error) && error.details?.reusedConnection === true) {
        return this.exchange(request, false);
      }
      throw error;
    }
  }

  close(): void {
    this.agent.destroy();
  }

  private exchange(request: GatewayRequest, agent: http.Agent | false): Promise<GatewayResponse> {
    const payload =
      request.body === undefined ? undefined : Buffer.from(JSON.stringify(request.body), "utf8");
    const target = this.endpoint.connectTo;
    return new Promise<GatewayResponse>((resolve, reject) => {
      if (request.signal?.aborted) {
        reject(new AppError("TIMEOUT", "gateway request aborted before it started"));
        return;
      }
      const req = this.module.request({
        protocol: target.protocol,
        hostname: target.hostname,
        port: target.port || (target.protocol === "https:" ? 443 : 80),
        method: request.method,
        path: request.path,
        agent,
        headers: {
          host: this.endpoint.host,
          authorization: `Bearer ${this.token}`,
          ...(this.endpoint.trafficAccessToken
            ? { "e2b-traffic-access-token": this.endpoint.trafficAccessToken }
            : {}),
          ...(payload ? { "content-type": "application/json", "content-length": payload.length } : {}),
        },
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
      req.on("error", (error: NodeJS.ErrnoException) => {
        finish();
        if (isAppError(error)) {
          reject(error);
          return;
        }
        reject(
          new AppError(
            "UNAVAILABLE",
            `gateway ${request.method} ${pathOnly(request.path)} failed: ${error.message}`,
            {
              cause: error,
              details: { errno: error.code, ...(req.reusedSocket ? { reusedConnection: true } : {}) },
              userMessage: "The workspace's MCP gateway is not reachable",
            },
          ),
        );
      });
      collectGatewayResponse(req, (response) => {
        finish();
        resolve(response);
      });
      req.end(payload);
    });
  }
}

function pathOnly(value: string): string {
  return value.split("?")[0] ?? value;
}
