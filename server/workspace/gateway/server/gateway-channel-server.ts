import type http from "node:http";
import type { Duplex } from "node:stream";
import { AppError } from "@/server/shared/errors";
import { lineSplitter } from "@/server/shared/line-splitter";
import { CancelSource, type CancelSignal } from "@/server/workspace/mcp/cancel-signal";
import {
  CHANNEL_CANCEL,
  CHANNEL_PATH,
  CHANNEL_PROTOCOL,
  MAX_CHANNEL_LINE_BYTES,
  splitFields,
} from "../channel-framing";
import { errorAnswer } from "./http-util";

/** A channel frame as the router sees it (the same shape an HTTP request is turned into). */
type ChannelRequest = { method: string; url: string; body: () => Promise<unknown> };

/** True for `GET /channel` asking to switch to the channel protocol. */
export function isChannelUpgrade(req: http.IncomingMessage): boolean {
  return (
    req.method === "GET" &&
    req.url === CHANNEL_PATH &&
    (req.headers.upgrade ?? "").toLowerCase() === CHANNEL_PROTOCOL
  );
}

/**
 * Answers the upgrade, then serves the channel's lines (channel-framing.ts) until the host closes it.
 * Each request runs as the same route an HTTP request would, concurrently; a CANCEL line, or the
 * connection closing, aborts the requests still running (their upstream calls are cancelled).
 */
export function serveChannel(
  socket: Duplex,
  maxBodyBytes: number,
  route: (request: ChannelRequest, signal: CancelSignal) => Promise<unknown>,
): void {
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${CHANNEL_PROTOCOL}\r\nConnection: Upgrade\r\n\r\n`,
  );
  const running = new Map<string, CancelSource>();
  const answer = (id: string, status: number, body: unknown) => {
    running.delete(id);
    if (!socket.writable) return;
    socket.write(`${id} ${status} ${JSON.stringify(body)}\n`);
  };
  const onLine = (raw: Buffer) => {
    const line = raw.toString("utf8");
    const [id = "", method = "", path = "", body = ""] = splitFields(line, 3);
    if (method === CHANNEL_CANCEL) {
      running.get(id)?.abort();
      running.delete(id);
      return;
    }
    // Not an AbortController: making one per request cost more than the rest of a relayed call's work.
    const cancel = new CancelSource();
    running.set(id, cancel);
    const request: ChannelRequest = {
      method,
      url: path,
      body: () => {
        if (Buffer.byteLength(body) > maxBodyBytes) {
          return Promise.reject(
            new AppError("PAYLOAD_TOO_LARGE", `request body exceeds ${maxBodyBytes} bytes`),
          );
        }
        return Promise.resolve(parseBody(body));
      },
    };
    route(request, cancel).then(
      (result) => answer(id, 200, result),
      (error: unknown) => answer(id, ...errorAnswer(error)),
    );
  };
  const split = lineSplitter(onLine, MAX_CHANNEL_LINE_BYTES);
  socket.on("data", (chunk: Buffer) => {
    if (!split(chunk)) socket.destroy();
  });
  socket.on("error", () => undefined); // a host that went away: 'close' follows
  socket.on("close", () => {
    for (const cancel of running.values()) cancel.abort();
    running.clear();
  });
}

function parseBody(text: string): unknown {
  if (text === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new AppError("BAD_REQUEST", "request body is not JSON");
  }
}
