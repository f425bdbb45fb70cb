import { timingSafeEqual } from "node:crypto";
import type { z } from "zod";
import { APP_ERROR_CODES, AppError, type AppErrorCode } from "@/server/shared/errors";
import type { CancelSignal } from "@/server/workspace/mcp/cancel-signal";
import type { McpScope, McpToolInfo, McpToolResult, TMcpDeclaration } from "@/server/workspace/mcp/types";
import { ZMcpDeclaration } from "@/server/workspace/mcp/types";
import {
  gatewayPaths,
  ZGatewayCallToolResponse,
  ZGatewayErrorBody,
  ZGatewayHealth,
  ZGatewayOk,
  ZGatewayToolList,
  type TGatewayHealth,
} from "../gateway-protocol";
import type { GatewayTransport } from "./gateway-transport";
import type { GatewayRequest } from "./gateway-wire";

export type GatewayClientOptions = {
  /** Bound on registry calls (add, remove, list). Tool calls use their own timeout. Default 60 s. */
  requestTimeoutMs?: number;
  /**
   * A gateway still starting: every request waits for this first, and fails with its error when the
   * gateway did not start (the health checks that decide it use a client without one).
   */
  ready?: Promise<unknown>;
};

/** Headroom so the gateway reports an upstream timeout (504) before the host gives up on the socket. */
const HOST_TIMEOUT_MARGIN_MS = 5_000;

/** Typed calls to one gateway instance; every failure is an AppError. */
export class GatewayClient {
  private readonly requestTimeoutMs: number;
  private readonly ready: Promise<unknown> | undefined;

  constructor(
    private readonly transport: GatewayTransport,
    options: GatewayClientOptions = {},
  ) {
    this.requestTimeoutMs = options.requestTimeoutMs ?? 60_000;
    this.ready = options.ready;
  }

  async health(timeoutMs = 5_000): Promise<TGatewayHealth> {
    return this.send({ method: "GET", path: gatewayPaths.health(), timeoutMs }, ZGatewayHealth);
  }

  /** True iff the gateway answers and is the instance started with `expectedNonce` (constant-time compare). */
  async isHealthy(expectedNonce: string, timeoutMs = 5_000): Promise<boolean> {
    return (await this.healthOf(expectedNonce, timeoutMs)) !== null;
  }

  /** The health answer when the gateway answers and is the instance started with `expectedNonce`, else null. */
  async healthOf(expectedNonce: string, timeoutMs = 5_000): Promise<TGatewayHealth | null> {
    try {
      const health = await this.health(timeoutMs);
      const actual = Buffer.from(health.instance_nonce);
      const expected = Buffer.from(expectedNonce);
      return actual.length === expected.length && timingSafeEqual(actual, expected) ? health : null;
    } catch {
      return null;
    }
  }

  async listMcps(scope: McpScope): Promise<TMcpDeclaration[]> {
    return this.send(
      { method: "GET", path: gatewayPaths.mcps(scope), timeoutMs: this.requestTimeoutMs },
      ZMcpDeclaration.array(),
    );
  }

  /** Registers (and, for stateful MCPs, connects) a declaration. CONFLICT when the name is taken. */
  async addMcp(scope: McpScope, declaration: TMcpDeclaration): Promise<void> {
    await this.send(
      { method: "POST", path: gatewayPaths.mcps(scope), body: declaration, timeoutMs: this.requestTimeoutMs },
      ZGatewayOk,
    );
  }

  async removeMcp(scope: McpScope, name: string): Promise<void> {
    await this.send(
      { method: "DELETE", path: gatewayPaths.mcp(name, scope), timeoutMs: this.requestTimeoutMs },
      ZGatewayOk,
    );
  }

  async listTools(scope: McpScope, name: string): Promise<McpToolInfo[]> {
    return this.send(
      { method: "GET", path: gatewayPaths.tools(name, scope), timeoutMs: this.requestTimeoutMs },
      ZGatewayToolList,
    );
  }

  async callTool(
    scope: McpScope,
    name: string,
    tool: string,
    args: Record<string, unknown>,
    options: { timeoutMs: number; signal?: CancelSignal | undefined },
  ): Promise<McpToolResult> {
    const response = await this.send(
      {
        method: "POST",
        path: gatewayPaths.tool(name, tool, scope),
        body: { arguments: args, timeout_ms: options.timeoutMs },
        timeoutMs: options.timeoutMs + HOST_TIMEOUT_MARGIN_MS,
        signal: options.signal,
      },
      ZGatewayCallToolResponse,
    );
    return response.result;
  }

  private async send<S extends z.ZodType>(request: GatewayRequest, schema: S): Promise<z.infer<S>> {
    if (this.ready) await this.ready;
    const response = await this.transport.request(request);
    const text = response.body.toString("utf8");
    if (response.status >= 400) throw gatewayError(response.status, text);
    return parseGatewayJson(text, schema);
  }
}

/** A gateway answer's JSON body checked against `schema`; INTERNAL when it is not what the protocol says. */
export function parseGatewayJson<S extends z.ZodType>(text: string, schema: S): z.infer<S> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new AppError("INTERNAL", `gateway answered non-JSON: ${text.slice(0, 200)}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new AppError("INTERNAL", `gateway answered an unexpected shape: ${parsed.error.message}`);
  }
  return parsed.data;
}

/** The AppError a gateway error answer stands for: its `code` when it sent one, else one for the status. */
export function gatewayError(status: number, text: string): AppError {
  let detail = text.slice(0, 500);
  let code = codeForStatus(status);
  let details: Record<string, unknown> = {};
  try {
    const parsed = ZGatewayErrorBody.safeParse(JSON.parse(text));
    if (parsed.success) {
      detail = parsed.data.detail;
      if (parsed.data.code && parsed.data.code in APP_ERROR_CODES) code = parsed.data.code as AppErrorCode;
      details = parsed.data.details ?? {};
    }
  } catch {
    // not JSON (e.g. the 401 text body): keep the raw text
  }
  return new AppError(code, status === 401 ? `gateway HTTP 401: ${detail}` : detail, {
    details: { ...details, gatewayStatus: status },
  });
}

function codeForStatus(status: number): AppErrorCode {
  switch (status) {
    case 400:
      return "BAD_REQUEST";
    case 401:
      return "UNAUTHORIZED";
    case 403:
      return "FORBIDDEN";
    case 404:
      return "NOT_FOUND";
    case 409:
      return "CONFLICT";
    case 413:
      return "PAYLOAD_TOO_LARGE";
    case 422:
      return "UNPROCESSABLE";
    case 503:
      return "UNAVAILABLE";
    case 504:
      return "TIMEOUT";
    default:
      return "INTERNAL";
  }
}

/**
 * Waits until the gateway answers /health with `expectedNonce` (so a stale instance or a leftover socket
 * never counts), polling with exponential backoff (10 ms doubling to `maxPollDelayMs`, default 500 ms) up to
 * a deadline. Resolves with that health answer (its `protocol` says which endpoints the gateway serves).
 */
export async function waitForGatewayHealthy(
  client: GatewayClient,
  expectedNonce: string,
  options: { timeoutMs: number; maxPollDelayMs?: number; diagnostics?: () => Promise<string> },
): Promise<TGatewayHealth> {
  const maxDelay = options.maxPollDelayMs ?? 500;
  const deadline = Date.now() + options.timeoutMs;
  let delay = Math.min(10, maxDelay);
  for (;;) {
    const remaining = deadline - Date.now();
    const health = await client.healthOf(expectedNonce, Math.max(100, Math.min(2_000, remaining)));
    if (health) return health;
    if (Date.now() + delay > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, maxDelay);
  }
  const log = await options.diagnostics?.().catch(() => undefined);
  throw gatewayStartFailed(options.timeoutMs, log);
}

/**
 * A gateway that never answered its health check within `timeoutMs`, with the end of its log when the
 * caller could read it: the last lines go into the message, which a failed start's report and a test's
 * output show (the details hold the longer tail; clients see only the user message).
 */
export function gatewayStartFailed(timeoutMs: number, log: string | undefined): AppError {
  const tail = log?.trim() ?? "";
  const says =
    log === undefined
      ? ""
      : tail === ""
        ? "; its log is empty"
        : `; its log ends: ${tail.split("\n").slice(-3).join(" | ").slice(-600)}`;
  return new AppError("UNAVAILABLE", `the MCP gateway did not become healthy within ${timeoutMs} ms${says}`, {
    userMessage: "The workspace's MCP gateway failed to start",
    details: tail ? { gatewayLogTail: log } : undefined,
  });
}
