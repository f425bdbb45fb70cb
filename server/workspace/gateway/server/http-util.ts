import type http from "node:http";
import { toAppError } from "@/server/shared/errors";
import type { TGatewayErrorBody } from "../gateway-protocol";

/** AppError codes survive the hop: the host client rebuilds the same AppError from `code`. */
export function errorAnswer(error: unknown): [number, TGatewayErrorBody] {
  const appError = toAppError(error);
  return [
    appError.httpStatus,
    {
      detail: appError.message,
      code: appError.code,
      ...(appError.details ? { details: appError.details } : {}),
    },
  ];
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  if (res.destroyed || res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** Sends the error body, or cuts the connection when a streamed answer already started (the client sees it). */
export function sendError(res: http.ServerResponse, error: unknown): void {
  if (res.headersSent) res.destroy();
  else sendJson(res, ...errorAnswer(error));
}

/** True when the client holds the body back until it sees `100 Continue`. */
export function expectsContinue(req: http.IncomingMessage): boolean {
  return (req.headers.expect ?? "").toLowerCase() === "100-continue";
}
