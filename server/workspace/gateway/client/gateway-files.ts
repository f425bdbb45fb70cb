import type http from "node:http";
import { PassThrough, Readable } from "node:stream";
import type { z } from "zod";
import { AppError, isAppError } from "@/server/shared/errors";
import type { DirEntry, FileStat, WriteFileOptions } from "@/server/workspace/drivers/port";
import {
  FILE_OP_METHODS,
  FILE_SERVICE_DOWN,
  fileOpPath,
  ZGatewayListResponse,
  ZGatewayOk,
  ZGatewayRealpathResponse,
  ZGatewayStatResponse,
  type TGatewayFileOp,
} from "../gateway-protocol";
import { gatewayError, parseGatewayJson } from "./gateway-client";
import { openGatewayStream } from "./gateway-transport";
import type { GatewayEndpoint } from "./gateway-wire";

export type GatewayFileClientOptions = {
  /** Bound on an answer's headers (a read's first byte, a write's 100-continue, a stat's JSON). Default 5 min. */
  requestTimeoutMs?: number;
  /**
   * A gateway still starting: resolves true once it serves the file endpoints, false when it is too old to.
   * Operations wait for it, and refuse with a fall-back error when it is false or the gateway did not start.
   */
  ready?: Promise<boolean>;
};

/** Set in `details` of errors after which the SAME operation may be sent another way (nothing happened). */
const FALLBACK = "gatewayFallback";
/** JSON answers (listings included) above this size are refused. */
const MAX_JSON_BYTES = 64 * 1024 * 1024;

/**
 * The gateway's file endpoints (protocol ≥ 2) from the host: the backend port's file operations on
 * absolute sandbox paths, with the same AppErrors. Bytes stream both ways with backpressure; nothing is
 * buffered whole. Errors that mean "the gateway could not take the request, nothing was done" (socket
 * missing or refused, token rotated by another process, file service down) are marked: see `canFallBack`.
 */
export class GatewayFileClient {
  private readonly timeoutMs: number;
  private readonly ready: Promise<boolean> | undefined;

  constructor(
    private readonly endpoint: GatewayEndpoint,
    private readonly token: string,
    options: GatewayFileClientOptions = {},
  ) {
    this.timeoutMs = options.requestTimeoutMs ?? 5 * 60_000;
    this.ready = options.ready;
  }

  /** `start` and `end` are inclusive byte offsets, as in the port. */
  async readFile(path: string, range: { start?: number; end?: number } = {}): Promise<Readable> {
    const answer = await this.open("read", { path, start: range.start, end: range.end });
    if (answer.statusCode !== 200) throw await errorOf(answer);
    const out = new PassThrough({ highWaterMark: 1024 * 1024 });
    answer.pipe(out);
    const cut = () => {
      if (!answer.complete) {
        out.destroy(new AppError("UNAVAILABLE", `reading ${path} through the gateway was cut off`));
      }
    };
    answer.on("aborted", cut);
    answer.on("error", cut);
    answer.on("close", cut);
    // A consumer that stops early closes the connection; the gateway then closes the file.
    out.on("close", () => {
      if (!answer.complete) answer.destroy();
    });
    return out;
  }

  async writeFile(path: string, data: Readable | Uint8Array | string, options: WriteFileOptions = {}) {
    const mode = options.append ? "append" : options.exclusive ? "exclusive" : "replace";
    const perm = options.mode !== undefined ? options.mode & 0o7777 : undefined;
    const body = data instanceof Readable ? data : Readable.from([Buffer.from(data)]);
    const answer = await this.open("write", { path, mode, perm }, body);
    await this.json(answer, ZGatewayOk);
  }

  async stat(path: string): Promise<FileStat | null> {
    return (await this.json(await this.open("stat", { path }), ZGatewayStatResponse)).stat;
  }

  async list(path: string): Promise<DirEntry[]> {
    return (await this.json(await this.open("list", { path }), ZGatewayListResponse)).entries;
  }

  async mkdir(path: string): Promise<void> {
    await this.json(await this.open("mkdir", { path }), ZGatewayOk);
  }

  async remove(path: string): Promise<void> {
    await this.json(await this.open("remove", { path }), ZGatewayOk);
  }

  async move(from: string, to: string): Promise<void> {
    await this.json(await this.open("move", { from, to }), ZGatewayOk);
  }

  async realpath(path: string): Promise<string | null> {
    return (await this.json(await this.open("realpath", { path }), ZGatewayRealpathResponse)).path;
  }

  private async open(
    op: TGatewayFileOp,
    params: Record<string, string | number | undefined>,
    body?: Readable,
  ): Promise<http.IncomingMessage> {
    if (this.ready) await this.serving();
    try {
      const { body: answer } = await openGatewayStream(this.endpoint, this.token, {
        method: FILE_OP_METHODS[op],
        path: fileOpPath(op, params),
        body,
        timeoutMs: this.timeoutMs,
      });
      return answer;
    } catch (error) {
      const appError = isAppError(error)
        ? error
        : new AppError("UNAVAILABLE", String(error), { cause: error });
      const errno = appError.details?.errno;
      // Only a connection that never opened is certain to have done nothing.
      const unreached =
        (errno === "ENOENT" || errno === "ECONNREFUSED") && appError.details?.bodyStarted !== true;
      throw unreached ? withFallback(appError) : appError;
    }
  }

  /** Waits for the gateway; nothing was sent when it refuses, so the operation may go another way. */
  private async serving(): Promise<void> {
    let serves: boolean;
    try {
      serves = await this.ready!;
    } catch (error) {
      throw withFallback(
        new AppError("UNAVAILABLE", `the gateway is not running: ${String(error)}`, { cause: error }),
      );
    }
    if (!serves) {
      throw withFallback(new AppError("UNAVAILABLE", "the gateway is too old to serve file operations"));
    }
  }

  private async json<S extends z.ZodType>(answer: http.IncomingMessage, schema: S): Promise<z.infer<S>> {
    if (answer.statusCode !== 200) throw await errorOf(answer);
    return parseGatewayJson(await readCapped(answer), schema);
  }
}

/** True when the gateway refused before doing anything, so the operation may run another way (exec). */
export function canFallBack(error: unknown): boolean {
  return isAppError(error) && error.details?.[FALLBACK] === true;
}

function withFallback(error: AppError): AppError {
  return new AppError(error.code, error.message, {
    cause: error.cause,
    userMessage: error.userMessage,
    details: { ...error.details, [FALLBACK]: true },
  });
}

async function errorOf(answer: http.IncomingMessage): Promise<AppError> {
  const status = answer.statusCode ?? 0;
  const text = await readCapped(answer, 64 * 1024).catch(() => "");
  const error = gatewayError(status, text);
  // 401: another process restarted the gateway with a new token. 503 + marker: its file worker is down.
  // Either way the request was refused before it was read.
  if (status === 401 || (status === 503 && error.details?.[FILE_SERVICE_DOWN] === true))
    return withFallback(error);
  return error;
}

async function readCapped(stream: http.IncomingMessage, cap = MAX_JSON_BYTES): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > cap) {
      stream.destroy();
      throw new AppError("PAYLOAD_TOO_LARGE", `gateway answer exceeds ${cap} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}
