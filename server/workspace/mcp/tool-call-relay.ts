import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { CancelSignal } from "./cancel-signal";
import type { StdioTransport } from "./stdio-transport";

/** Relay ids are strings; the SDK numbers its own requests, so the two never collide on one session. */
const RELAY_ID_PREFIX = "berth-relay-";

type Waiter = { resolve: (result: Record<string, unknown>) => void; reject: (error: McpError) => void };

/**
 * Tool calls written straight onto a connected session's transport, next to the SDK client that owns it.
 * The in-sandbox gateway relays tool calls for hosts that check the answer themselves (the gateway
 * protocol's boundary, ZGatewayToolResult), so the SDK's per-call work there (its request bookkeeping,
 * a zod parse of every message and of the result) only adds to each call, on the sandbox's slower Node.
 * Answers are taken from the transport's `intercept`, before its schema check; `take` checks what it
 * relies on (a result object, or an error's numeric code and text).
 * Only for tools the SDK would not treat specially: no output schema (which the SDK validates) and no
 * required task execution (which it refuses); see `relayable`.
 *
 * Semantics follow the SDK's `Protocol.request`: a timeout or an abort sends `notifications/cancelled`
 * upstream and rejects with McpError RequestTimeout; a closed transport rejects ConnectionClosed; an
 * error answer rejects with its McpError.
 */
export class ToolCallRelay {
  private nextId = 1;
  private readonly waiting = new Map<string, Waiter>();

  /** Wraps the transport's close handler, so call it after the SDK client connected (it sets them). */
  constructor(private readonly transport: StdioTransport) {
    transport.intercept = (message) => this.take(message);
    const onclose = transport.onclose;
    transport.onclose = () => {
      const waiters = [...this.waiting.values()];
      this.waiting.clear();
      for (const waiter of waiters)
        waiter.reject(new McpError(ErrorCode.ConnectionClosed, "Connection closed"));
      onclose?.();
    };
  }

  call(
    tool: string,
    args: Record<string, unknown>,
    options: { timeoutMs: number; signal?: CancelSignal | undefined },
  ): Promise<Record<string, unknown>> {
    const { signal, timeoutMs } = options;
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(asMcpError(signal.reason));
        return;
      }
      const id = `${RELAY_ID_PREFIX}${this.nextId++}`;
      const settle = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const cancel = (reason: unknown) => {
        if (!this.waiting.delete(id)) return;
        settle();
        this.transport
          .send({
            jsonrpc: "2.0",
            method: "notifications/cancelled",
            params: { requestId: id, reason: String(reason) },
          })
          .catch(() => undefined); // the server may be gone already: the call fails either way
        reject(asMcpError(reason));
      };
      const timer = setTimeout(
        () => cancel(new McpError(ErrorCode.RequestTimeout, "Request timed out", { timeout: timeoutMs })),
        timeoutMs,
      );
      const onAbort = () => cancel(signal?.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.set(id, {
        resolve: (result) => {
          settle();
          resolve(result);
        },
        reject: (error) => {
          settle();
          reject(error);
        },
      });
      this.transport
        .send({ jsonrpc: "2.0", id, method: "tools/call", params: { name: tool, arguments: args } })
        .catch((error: unknown) => {
          if (!this.waiting.delete(id)) return;
          settle();
          reject(asMcpError(error, ErrorCode.ConnectionClosed));
        });
    });
  }

  /** True when `message` answers one of this relay's calls (then it is settled and not passed on). */
  private take(message: unknown): boolean {
    if (!isObject(message) || "method" in message || typeof message.id !== "string") return false;
    const waiter = this.waiting.get(message.id);
    if (!waiter) return false;
    this.waiting.delete(message.id);
    if (isObject(message.error)) {
      const { code, message: text, data } = message.error;
      if (typeof code === "number" && Number.isInteger(code) && typeof text === "string")
        waiter.reject(new McpError(code, text, data));
      else waiter.reject(new McpError(ErrorCode.InvalidRequest, "tools/call answered a malformed error"));
    } else if (isObject(message.result)) {
      waiter.resolve(message.result);
    } else {
      waiter.reject(new McpError(ErrorCode.InvalidRequest, "tools/call answered without a result object"));
    }
    return true;
  }
}

/** True when the SDK would call `tool` plainly: no output schema to check, no task execution required. */
export function relayable(tool: { outputSchema?: unknown; execution?: { taskSupport?: string } }): boolean {
  return tool.outputSchema === undefined && tool.execution?.taskSupport !== "required";
}

/** As the SDK's `Protocol.request` turns a cancel reason into the error it rejects with. */
function asMcpError(reason: unknown, code: ErrorCode = ErrorCode.RequestTimeout): McpError {
  return reason instanceof McpError ? reason : new McpError(code, String(reason));
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
