import http from "node:http";
import type { Duplex } from "node:stream";
import { AppError } from "@/server/shared/errors";
import { lineSplitter } from "@/server/shared/line-splitter";
import {
  CHANNEL_CANCEL,
  CHANNEL_PATH,
  CHANNEL_PROTOCOL,
  MAX_CHANNEL_LINE_BYTES,
  splitFields,
} from "../channel-framing";
import type { GatewayEndpoint, GatewayRequest, GatewayResponse } from "./gateway-wire";

type Pending = {
  request: GatewayRequest;
  resolve: (response: GatewayResponse) => void;
  reject: (error: AppError) => void;
  settle: () => void;
};

/**
 * The host end of the gateway channel (channel-framing.ts): opened on first use by an HTTP upgrade carrying
 * the token, then shared by every request of the transport. `request` resolves null when the gateway does
 * not speak it (an older gateway answers the upgrade like any unknown route): the caller then uses plain
 * HTTP, and so does every later request. A channel that breaks fails its requests in flight UNAVAILABLE
 * (a GET, which changes nothing, is sent once more); the next request opens a new one.
 */
export class GatewayChannel {
  private socket: Duplex | null = null;
  private opening: Promise<Duplex | null> | null = null;
  private unsupported = false;
  private nextId = 1;
  private readonly pending = new Map<string, Pending>();

  constructor(
    private readonly endpoint: GatewayEndpoint,
    private readonly token: string,
  ) {}

  async request(request: GatewayRequest, retried = false): Promise<GatewayResponse | null> {
    if (this.unsupported) return null;
    const socket = this.socket ?? (await (this.opening ??= this.open()));
    if (!socket) return null;
    try {
      return await this.exchange(socket, request);
    } catch (error) {
      const broken = error instanceof AppError && error.details?.channelClosed === true;
      if (broken && !retried && request.method === "GET") return this.request(request, true);
      throw error;
    }
  }

  private exchange(socket: Duplex, request: GatewayRequest): Promise<GatewayResponse> {
    return new Promise<GatewayResponse>((resolve, reject) => {
      if (request.signal?.aborted) {
        reject(new AppError("TIMEOUT", "gateway request aborted before it started"));
        return;
      }
      const id = String(this.nextId++);
      const cancel = (error: AppError) => {
        if (!this.pending.delete(id)) return;
        settle();
        if (socket.writable) socket.write(`${id} ${CHANNEL_CANCEL}\n`);
        this.idle(socket);
        reject(error);
      };
      const timer = setTimeout(() => {
        cancel(
          new AppError("TIMEOUT", `gateway ${request.method} ${pathOnly(request.path)} timed out`, {
            details: { timeoutMs: request.timeoutMs },
          }),
        );
      }, request.timeoutMs);
      const onAbort = () => cancel(new AppError("TIMEOUT", "gateway request aborted"));
      request.signal?.addEventListener("abort", onAbort, { once: true });
      const settle = () => {
        clearTimeout(timer);
        request.signal?.removeEventListener("abort", onAbort);
      };
      this.pending.set(id, { request, resolve, reject, settle });
      const body = request.body === undefined ? "" : JSON.stringify(request.body);
      if (this.pending.size === 1) (socket as { ref?: () => void }).ref?.();
      socket.write(`${id} ${request.method} ${request.path} ${body}\n`);
    });
  }

  private open(): Promise<Duplex | null> {
    return new Promise<Duplex | null>((resolve) => {
      const req = http.request({
        ...this.endpoint,
        method: "GET",
        path: CHANNEL_PATH,
        headers: {
          authorization: `Bearer ${this.token}`,
          connection: "Upgrade",
          upgrade: CHANNEL_PROTOCOL,
        },
        agent: false,
      });
      const timer = setTimeout(() => req.destroy(), 5_000);
      req.on("upgrade", (_res, socket) => {
        clearTimeout(timer);
        this.opening = null;
        this.attach(socket);
        resolve(socket);
      });
      req.on("response", (res) => {
        // Any answer but the switch: this gateway does not speak the channel (or refused the token, which
        // plain HTTP then reports as it always did).
        clearTimeout(timer);
        res.resume();
        this.unsupported = true;
        this.opening = null;
        resolve(null);
      });
      req.on("error", () => {
        // Not reachable now (starting, restarting): this request goes over HTTP, the next tries again.
        clearTimeout(timer);
        this.opening = null;
        resolve(null);
      });
      req.end();
    });
  }

  private attach(socket: Duplex): void {
    this.socket = socket;
    const split = lineSplitter((line) => this.onAnswer(line.toString("utf8")), MAX_CHANNEL_LINE_BYTES);
    socket.on("data", (chunk: Buffer) => {
      if (!split(chunk)) socket.destroy();
    });
    socket.on("error", () => undefined); // 'close' follows
    socket.on("close", () => {
      if (this.socket === socket) this.socket = null;
      const failed = [...this.pending.values()];
      this.pending.clear();
      for (const entry of failed) {
        entry.settle();
        entry.reject(
          new AppError(
            "UNAVAILABLE",
            `gateway ${entry.request.method} ${pathOnly(entry.request.path)} failed: the channel closed`,
            {
              details: { channelClosed: true },
              userMessage: "The workspace's MCP gateway is not reachable",
            },
          ),
        );
      }
    });
    this.idle(socket);
  }

  private onAnswer(line: string): void {
    const [id = "", status = "", body = ""] = splitFields(line, 2);
    const entry = this.pending.get(id);
    if (!entry) return; // cancelled meanwhile
    this.pending.delete(id);
    entry.settle();
    if (this.socket) this.idle(this.socket);
    entry.resolve({ status: Number(status), body: Buffer.from(body, "utf8") });
  }

  /** An idle channel does not keep the host process alive (as the HTTP agent's idle sockets do not). */
  private idle(socket: Duplex): void {
    if (this.pending.size === 0) (socket as { unref?: () => void }).unref?.();
  }

  /** Drops the connection; requests in flight fail UNAVAILABLE. */
  close(): void {
    this.socket?.destroy();
  }
}

function pathOnly(path: string): string {
  return path.split("?")[0] ?? path;
}
