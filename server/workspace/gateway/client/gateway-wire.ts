import type { CancelSignal } from "@/server/workspace/mcp/cancel-signal";

/** The shapes of a host-side gateway request, shared by the HTTP transport and the channel. */

/** Where the host reaches a gateway: a unix socket (Docker, via the bind mount) or a TCP address. */
export type GatewayEndpoint = { socketPath: string } | { host: string; port: number };

export type GatewayRequest = {
  method: "GET" | "POST" | "DELETE";
  /** Path plus query string, already encoded (see gatewayPaths). */
  path: string;
  body?: unknown;
  timeoutMs: number;
  signal?: CancelSignal | undefined;
};

export type GatewayResponse = { status: number; body: Buffer };
